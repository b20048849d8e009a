/* The dist interface over MPI (Debian's OpenMPI). MPI calls come from the main thread only, between
 * OpenMP regions: MPI_THREAD_FUNNELED. In a CUDA build, collectives of device memory (the tensor
 * data of --device cuda) go through NCCL instead (src/cuda/nccl_comm.h), with MPI bootstrapping its
 * communicator. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../core/check.h"
#include "dist.h"
#ifdef VITC_CUDA
#include "../core/memory.h"
#include "../cuda/nccl_comm.h"
#include "../cuda/train_step.h"
#endif

static bool active; /* MPI initialised: launched by mpirun */
static int rank_, size_ = 1, local_rank_, local_size_ = 1;
static int held_stderr = -1;  /* ranks > 0 during start-up: the real stderr, while fd 2 is a file */
static FILE *held;            /* that file */
static bool started;

/* the variables MPI launchers (OpenMPI's, PMI, PMIx) give their processes */
static bool launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

void dist_init(int *argc, char ***argv) {
    if (!launched_by_mpi()) return;
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "error: MPI_Init_thread failed\n");
        exit(1);
    }
    active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    held = rank_ > 0 ? tmpfile() : NULL;
    if (held) {
        fflush(stderr);
        held_stderr = dup(2);
        dup2(fileno(held), 2);
    }
}

bool dist_startup_done(bool ok) {
    if (started) return ok;
    started = true;
    if (!active) return ok;
    int lead_ok = ok;
    MPI_Bcast(&lead_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (held) { /* fd 2 back; what was held shown if it is this rank's own error */
        fflush(stderr);
        dup2(held_stderr, 2);
        close(held_stderr);
        if (!ok && lead_ok) {
            char buf[4096];
            size_t n;
            rewind(held);
            while ((n = fread(buf, 1, sizeof(buf), held)) > 0) fwrite(buf, 1, n, stderr);
            fprintf(stderr, "(rank %d)\n", rank_);
        }
        fclose(held);
        held = NULL;
    }
    return dist_all(ok);
}

#ifdef VITC_CUDA
static bool nccl_started;

/* Whether the collective of data goes through NCCL: device memory, which NCCL sums and broadcasts
 * where it lies. The communicator is made at the first such call, which every rank makes at the same
 * point (the ranks run the same program on the same kind of memory): rank 0's id reaches the others
 * by MPI_Bcast. */
static bool through_nccl(const void *data) {
    if (vitc_device() != DEV_CUDA || !cuda_is_device_memory(data)) return false;
    if (!nccl_started) {
        unsigned char id[CUDA_NCCL_ID_BYTES];
        if (rank_ == 0) cuda_nccl_unique_id(id);
        MPI_Bcast(id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        cuda_nccl_init(id, rank_, size_);
        nccl_started = true;
    }
    return true;
}
#endif

void dist_finalize(void) {
#ifdef VITC_CUDA
    if (nccl_started) cuda_nccl_free();
    nccl_started = false;
#endif
    if (active) MPI_Finalize();
    active = false;
}

int dist_rank(void) { return rank_; }
int dist_size(void) { return size_; }
int dist_local_rank(void) { return local_rank_; }
int dist_local_size(void) { return local_size_; }

int dist_default_threads(void) {
    if (local_size_ == 1) return 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > local_size_ ? (int)(cores / local_size_) : 1;
}

_Noreturn void dist_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (active) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void dist_barrier(void) {
    if (active) MPI_Barrier(MPI_COMM_WORLD);
}

void dist_broadcast(void *data, size_t bytes, int root) {
    if (!active) return;
#ifdef VITC_CUDA
    if (through_nccl(data)) {
        cuda_nccl_broadcast(data, bytes, root);
        return;
    }
#endif
    for (size_t done = 0; done < bytes;) { /* MPI counts are ints */
        int chunk = bytes - done > (1u << 30) ? 1 << 30 : (int)(bytes - done);
        MPI_Bcast((char *)data + done, chunk, MPI_BYTE, root, MPI_COMM_WORLD);
        done += (size_t)chunk;
    }
}

void dist_sum_f64(double *x, int n) {
    if (active) MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

void dist_sum_i64(int64_t *x, int n) {
    if (active) MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
}

void dist_max_f64(double *x, int n) {
    if (active) MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

bool dist_all(bool ok) {
    int v = ok;
    if (active) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return v;
}

struct dist_reducer {
    float *grad;
    int64_t n, bucket;   /* floats, floats per bucket */
    int n_buckets, next; /* buckets are taken from the end of the block: next is the count started */
    bool device;         /* grad is device memory: NCCL sums it (requests unused) */
    MPI_Request *requests;
    double wait_s;
};

dist_reducer *dist_reducer_create(float *grad, int64_t n, size_t bucket_bytes) {
    dist_reducer *r = xcalloc(1, sizeof(*r));
    r->grad = grad;
    r->n = n;
    r->bucket = (int64_t)(bucket_bytes / sizeof(float));
    if (r->bucket < 1) r->bucket = 1;
    r->n_buckets = n ? (int)((n + r->bucket - 1) / r->bucket) : 0;
    r->requests = xmalloc(sizeof(MPI_Request) * (size_t)(r->n_buckets ? r->n_buckets : 1));
#ifdef VITC_CUDA
    r->device = active && n && through_nccl(grad);
#endif
    return r;
}

void dist_reducer_free(dist_reducer *r) {
    if (!r) return;
    free(r->requests);
    free(r);
}

/* bucket k counts from the end: [max(0, n - (k+1)·bucket), n - k·bucket) */
static int64_t bucket_begin(const dist_reducer *r, int k) {
    int64_t b = r->n - (int64_t)(k + 1) * r->bucket;
    return b > 0 ? b : 0;
}

static void start_bucket(dist_reducer *r, int k) {
    int64_t begin = bucket_begin(r, k), end = r->n - (int64_t)k * r->bucket;
#ifdef VITC_CUDA
    if (r->device) {
        cuda_nccl_sum_start(r->grad + begin, end - begin);
        return;
    }
#endif
    MPI_Iallreduce(MPI_IN_PLACE, r->grad + begin, (int)(end - begin), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                   &r->requests[k]);
}

void dist_reducer_ready(dist_reducer *r, int64_t final_from) {
    if (!active) return;
    while (r->next < r->n_buckets && bucket_begin(r, r->next) >= final_from) start_bucket(r, r->next++);
    /* OpenMPI moves non-blocking collectives along only inside MPI calls */
    if (r->next && !r->device) {
        int done;
        MPI_Testall(r->next, r->requests, &done, MPI_STATUSES_IGNORE);
    }
}

void dist_reducer_finish(dist_reducer *r, float scale) {
    if (!active) return;
    while (r->next < r->n_buckets) start_bucket(r, r->next++);
    double t0 = MPI_Wtime();
#ifdef VITC_CUDA
    if (r->device) {
        cuda_nccl_wait(); /* on a GPU also the kernels queued before the last bucket */
        r->wait_s += MPI_Wtime() - t0;
        r->next = 0;
        if (scale != 1.0f) cuda_scale_floats(r->grad, r->n, scale);
        return;
    }
#endif
    MPI_Waitall(r->n_buckets, r->requests, MPI_STATUSES_IGNORE);
    r->wait_s += MPI_Wtime() - t0;
    r->next = 0;
    if (scale != 1.0f)
        for (int64_t i = 0; i < r->n; i++) r->grad[i] *= scale;
}

double dist_reducer_wait_seconds(dist_reducer *r) {
    double s = r->wait_s;
    r->wait_s = 0;
    return s;
}
