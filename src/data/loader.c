/* Prefetching loader: worker threads fill a ring of batch slots ahead of the training loop. A
 * batch's content depends only on (seed, epoch, batch index): the sample order is a seeded
 * permutation per epoch and every sample's augmentation has its own stream, so results are the
 * same whatever the number of workers. Memory is bounded by the ring (workers + 1 slots). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>

#include "../core/check.h"
#include "augment.h"
#include "data.h"

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

typedef struct slot {
    float *images;
    int *labels, *samples;
    int n, skipped, index, state;
} slot;

struct loader {
    const dataset *d;
    augment_config a;
    int batch, n_batches, n_slots, workers;
    int shard, shards; /* this process takes part `shard` of `shards` of every batch */
    bool train;
    uint64_t seed;
    int epoch, next_fill, next_return, busy;
    bool stop, returned_pending;
    int *order;
    unsigned char *warned; /* one warning per unreadable file */
    slot *slots;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static uint64_t sample_seed(uint64_t seed, int epoch, int index) {
    return seed * 0x9e3779b97f4a7c15ull + (uint64_t)epoch * 0xbf58476d1ce4e5b9ull + (uint64_t)index;
}

/* decodes and transforms one sample into dst; false (after one warning) if unreadable */
static bool load_sample(loader *l, int idx, float *dst) {
    int w, h;
    char err[4400];
    unsigned char *px = image_load(l->d->paths[idx], l->a.in_chans, &w, &h, err, sizeof(err));
    if (!px) {
        pthread_mutex_lock(&l->mu);
        if (!l->warned[idx]) {
            l->warned[idx] = 1;
            fprintf(stderr, "warning: skipping %s\n", err);
        }
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    image img = {px, w, h, l->a.in_chans};
    if (l->train) {
        rng r;
        rng_seed(&r, sample_seed(l->seed, l->epoch, idx), RNG_AUGMENT);
        transform_train(&l->a, &img, dst, &r);
    } else {
        transform_eval(&l->a, &img, dst);
    }
    stbi_image_free(px);
    return true;
}

static void fill_slot(loader *l, slot *s, int b) {
    size_t per = (size_t)l->a.img_size * l->a.img_size * l->a.in_chans;
    int begin = b * l->batch, end = begin + l->batch < l->d->n ? begin + l->batch : l->d->n;
    int first = begin + (int)((int64_t)(end - begin) * l->shard / l->shards);
    int last = begin + (int)((int64_t)(end - begin) * (l->shard + 1) / l->shards);
    s->n = s->skipped = 0;
    for (int i = first; i < last; i++) {
        int idx = l->order[i];
        if (load_sample(l, idx, s->images + per * s->n)) {
            s->labels[s->n] = l->d->labels[idx];
            s->samples[s->n++] = idx;
        } else {
            s->skipped++;
        }
    }
    s->index = b;
}

static void *worker(void *arg) {
    loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !(l->next_fill < l->n_batches &&
                             l->slots[l->next_fill % l->n_slots].state == SLOT_EMPTY))
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        int b = l->next_fill++;
        slot *s = &l->slots[b % l->n_slots];
        s->state = SLOT_FILLING;
        l->busy++;
        pthread_mutex_unlock(&l->mu);
        fill_slot(l, s, b);
        pthread_mutex_lock(&l->mu);
        s->state = SLOT_READY;
        l->busy--;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

loader *loader_create(const dataset *d, const augment_config *a, int batch_size, bool train,
                      int workers, uint64_t seed) {
    CHECK(batch_size >= 1 && workers >= 1, "loader: batch %d, workers %d", batch_size, workers);
    loader *l = xcalloc(1, sizeof(loader));
    l->d = d;
    l->a = *a;
    l->batch = batch_size;
    l->train = train;
    l->workers = workers;
    l->seed = seed;
    l->shards = 1;
    l->n_batches = train ? d->n / batch_size : (d->n + batch_size - 1) / batch_size;
    l->n_slots = workers + 1;
    l->order = xmalloc(sizeof(int) * (size_t)(d->n ? d->n : 1));
    l->warned = xcalloc((size_t)(d->n ? d->n : 1), 1);
    l->slots = xcalloc((size_t)l->n_slots, sizeof(slot));
    size_t per = (size_t)a->img_size * a->img_size * a->in_chans;
    for (int i = 0; i < l->n_slots; i++) {
        l->slots[i].images = xmalloc(sizeof(float) * per * (size_t)batch_size);
        l->slots[i].labels = xmalloc(sizeof(int) * (size_t)batch_size);
        l->slots[i].samples = xmalloc(sizeof(int) * (size_t)batch_size);
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->next_fill = l->n_batches; /* idle until an epoch starts */
    l->threads = xmalloc(sizeof(pthread_t) * (size_t)workers);
    for (int i = 0; i < workers; i++) pthread_create(&l->threads[i], NULL, worker, l);
    return l;
}

void loader_free(loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->workers; i++) pthread_join(l->threads[i], NULL);
    for (int i = 0; i < l->n_slots; i++)
        free(l->slots[i].images), free(l->slots[i].labels), free(l->slots[i].samples);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->slots);
    free(l->threads);
    free(l->order);
    free(l->warned);
    free(l);
}

void loader_shard(loader *l, int shard, int shards) {
    CHECK(shards >= 1 && shard >= 0 && shard < shards, "loader: shard %d of %d", shard, shards);
    l->shard = shard;
    l->shards = shards;
}

void loader_start_epoch(loader *l, int epoch, int first_batch) {
    pthread_mutex_lock(&l->mu);
    l->next_fill = l->n_batches; /* hold the workers, then wait for the ones still filling */
    while (l->busy) pthread_cond_wait(&l->cv, &l->mu);
    for (int i = 0; i < l->d->n; i++) l->order[i] = i;
    if (l->train) { /* Fisher-Yates with the epoch's stream */
        rng r;
        rng_seed(&r, sample_seed(l->seed, epoch, 0), RNG_DATA_ORDER);
        for (int i = l->d->n - 1; i > 0; i--) {
            int j = (int)rng_below(&r, (uint32_t)(i + 1)), t = l->order[i];
            l->order[i] = l->order[j], l->order[j] = t;
        }
    }
    l->epoch = epoch;
    for (int i = 0; i < l->n_slots; i++) l->slots[i].state = SLOT_EMPTY;
    l->next_fill = l->next_return = first_batch;
    l->returned_pending = false;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

bool loader_next(loader *l, batch *b) {
    pthread_mutex_lock(&l->mu);
    if (l->returned_pending) { /* the caller is done with the previous batch: free its slot */
        l->slots[(l->next_return - 1) % l->n_slots].state = SLOT_EMPTY;
        l->returned_pending = false;
        pthread_cond_broadcast(&l->cv);
    }
    if (l->next_return >= l->n_batches) {
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    slot *s = &l->slots[l->next_return % l->n_slots];
    while (!(s->state == SLOT_READY && s->index == l->next_return)) pthread_cond_wait(&l->cv, &l->mu);
    l->next_return++;
    l->returned_pending = true;
    pthread_mutex_unlock(&l->mu);
    b->images = s->images;
    b->labels = s->labels;
    b->samples = s->samples;
    b->n = s->n;
    b->skipped = s->skipped;
    return true;
}

int loader_batches_per_epoch(const loader *l) { return l->n_batches; }

bool image_load_eval(const char *path, const augment_config *a, float *out, char *err, size_t err_len) {
    int w, h;
    unsigned char *px = image_load(path, a->in_chans, &w, &h, err, err_len);
    if (!px) return false;
    image img = {px, w, h, a->in_chans};
    transform_eval(a, &img, out);
    stbi_image_free(px);
    return true;
}
