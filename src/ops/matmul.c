/* linear and batched matmul: the GEMM ops. */
#include "../core/arena.h"
#include "../core/check.h"
#include "../core/memory.h"
#include "../core/tape.h"
#include "../cpu/matmul.h"
#include "backward.h"
#include "op_table.h"
#include "ops.h"
#include "kernels.h"

double op_macs;

static void check_linear(const tensor *x, const tensor *w, const tensor *b) {
    CHECK(w->ndim == 2 && w->shape[1] == x->shape[x->ndim - 1],
          "linear: input %s does not match weight %s", SHAPE_STR(x), SHAPE_STR(w));
    CHECK(!b || (b->ndim == 1 && b->shape[0] == w->shape[0]),
          "linear: bias %s does not match weight %s", SHAPE_STR(b), SHAPE_STR(w));
}

/* x times the rows row0.. of w (and of b) */
static tensor *linear_rows_forward(tensor *x, tensor *w, tensor *b, int row0, int rows) {
    int K = x->shape[x->ndim - 1], M = (int)(x->numel / K), N = rows;
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = N;
    tensor *out = tensor_new(x->ndim, shape);
    const float *wr = w->data + (size_t)row0 * K, *br = b ? b->data + row0 : NULL;
    if (x->bf16) kernels->linear_forward_bf16_input(out->data, tensor_bf16(x), wr, br, M, K, N);
    else kernels->linear_forward(out->data, x->data, wr, br, M, K, N);
    op_macs += (double)M * K * N;
    return out;
}

void product_input_grad(tensor *x, const float *g, const float *w, int M, int K, int N) {
    float beta, *dx = tensor_grad_whole(x, &beta);
    kernels->gemm(false, false, M, K, N, 1.0f, g, w, beta, dx);
}

/* the gradients that reach x, w and b from the output rows row0.. of w (an fp32 gradient g); x's
 * written whole where it has none yet (CSwin's stripes: the first of their three products) */
static void linear_rows_backward(tensor *x, tensor *w, tensor *b, const float *g, int row0, int N) {
    int K = x->shape[x->ndim - 1], M = (int)(x->numel / K);
    float *dw = w->requires_grad ? tensor_grad(w) + (size_t)row0 * K : NULL;
    float *db = b && b->requires_grad ? tensor_grad(b) + row0 : NULL;
    const float *wr = w->data + (size_t)row0 * K;
    if (x->requires_grad) product_input_grad(x, g, wr, M, K, N);
    if (x->bf16) kernels->linear_backward_bf16_input(NULL, dw, db, g, tensor_bf16(x), wr, M, K, N);
    else kernels->linear_backward(NULL, dw, db, g, x->data, wr, M, K, N);
}

tensor *op_linear_rows(tensor *x, tensor *w, tensor *b, int row0, int rows) {
    check_linear(x, w, b);
    CHECK(row0 >= 0 && rows > 0 && row0 + rows <= w->shape[0],
          "linear: output rows %d..%d outside weight %s", row0, row0 + rows, SHAPE_STR(w));
    tensor *out = linear_rows_forward(x, w, b, row0, rows);
    tape_node *n = tape_record(OP_LINEAR, out, 3, (tensor *[]){x, w, b});
    if (n) n->iarg[0] = row0;
    return out;
}

tensor *op_linear(tensor *x, tensor *w, tensor *b) {
    CHECK(w->ndim == 2, "linear: weight %s is not (out, in)", SHAPE_STR(w));
    return op_linear_rows(x, w, b, 0, w->shape[0]);
}

void op_linear_backward(tape_node *n) {
    linear_rows_backward(n->in[0], n->in[1], n->in[2], n->out->grad, n->iarg[0],
                         n->out->shape[n->out->ndim - 1]);
}

void op_linear_strided_chunks(tensor *x, tensor *w, tensor *b, int n, int rows, int row0,
                              int stride, tensor **out) {
    check_linear(x, w, b);
    CHECK(n >= 1 && n <= TAPE_MAX_OUTPUTS && rows >= 1 && row0 >= 0 && (n == 1 || stride >= rows) &&
              row0 + (int64_t)(n - 1) * stride + rows <= w->shape[0],
          "linear: %d chunks of %d rows from row %d, %d apart, do not fit weight %s "
          "(1 to %d chunks)",
          n, rows, row0, stride, SHAPE_STR(w), TAPE_MAX_OUTPUTS);
    for (int i = 0; i < n; i++) out[i] = linear_rows_forward(x, w, b, row0 + i * stride, rows);
    tape_node *node = tape_record_outputs(OP_LINEAR_CHUNKS, n, out, 3, (tensor *[]){x, w, b});
    if (node) node->iarg[0] = row0, node->iarg[1] = stride;
}

void op_linear_chunks(tensor *x, tensor *w, tensor *b, int n, tensor **out) {
    check_linear(x, w, b);
    int rows = n >= 1 ? w->shape[0] / n : 0;
    CHECK(n >= 1 && n <= TAPE_MAX_OUTPUTS && rows * n == w->shape[0],
          "linear: %d outputs do not split into %d chunks (1 to %d)", w->shape[0], n,
          TAPE_MAX_OUTPUTS);
    op_linear_strided_chunks(x, w, b, n, rows, 0, rows, out);
}

/* One product gives x's gradient and one the weight's from the chunks' gradients in bf16: as
 * attention wrote them, and under bf16 the others rounded (bf16_store: the products would round
 * them packing; nothing reads the fp32 ones again) and a missing one zeros. Chunks apart in w
 * (CSwin's branches: q's, k's and v's rows of one) go into the products through copies of their
 * rows side by side. In fp32 each chunk runs as op_linear_rows's backward (a missing gradient is
 * zero). */
void op_linear_chunks_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *out[TAPE_MAX_OUTPUTS];
    int chunks = 0, row0 = n->iarg[0], stride = n->iarg[1];
    bool all16 = true;
    for (tensor *o; (o = tape_node_output(n, chunks)); chunks++) {
        out[chunks] = o;
        all16 &= o->grad_bf16;
    }
    int K = x->shape[x->ndim - 1], M = (int)(x->numel / K), N = out[0]->shape[out[0]->ndim - 1];
    bool round = !all16 && op_keeps_bf16();
    if (all16 || round) {
        const uint16_t *g[TAPE_MAX_OUTPUTS];
        size_t per = ((size_t)M * N + 1) / 2, n_round = round ? chunks * per : 0;
        float *rounded = round ? scratch_floats(n_round) : NULL;
        for (int i = 0; i < chunks; i++) {
            g[i] = (const uint16_t *)out[i]->grad;
            if (!round || out[i]->grad_bf16) continue;
            uint16_t *r = (uint16_t *)(rounded + i * per);
            if (out[i]->grad) kernels->bf16_store(r, out[i]->grad, (int64_t)M * N);
            else vitc_memory()->zero(r, sizeof(uint16_t) * M * N);
            g[i] = r;
        }
        float dx_beta = 1.0f, *dx = x->requires_grad ? tensor_grad_whole(x, &dx_beta) : NULL;
        float *dw = w->requires_grad ? tensor_grad(w) : NULL;
        float *db = b && b->requires_grad ? tensor_grad(b) : NULL;
        bool apart = chunks > 1 && stride != N;
        size_t n_apart = apart ? (size_t)chunks * N * (2 * K + 1) : 0;
        float *side = apart ? scratch_floats(n_apart) : NULL;
        const float *wc = w->data + (size_t)row0 * K;
        float *dwc = dw ? dw + (size_t)row0 * K : NULL, *dbc = db ? db + row0 : NULL;
        if (apart) {
            float *w_side = side, *dw_side = w_side + (size_t)chunks * N * K;
            float *db_side = dw_side + (size_t)chunks * N * K;
            /* (block_copy's blocks: the chunks, each N rows of K floats, `stride` rows apart) */
            kernels->block_copy(w_side, N, w->data, stride, chunks, K, 0, row0, N, 0);
            if (dw) kernels->block_copy(dw_side, N, dw, stride, chunks, K, 0, row0, N, 0);
            if (db) kernels->block_copy(db_side, N, db, stride, chunks, 1, 0, row0, N, 0);
            wc = w_side, dwc = dw ? dw_side : NULL, dbc = db ? db_side : NULL;
        }
        kernels->linear_chunks_backward_bf16_grad(dx, dx_beta, dwc, dbc, g, chunks,
                                                  x->bf16 ? NULL : x->data,
                                                  x->bf16 ? tensor_bf16(x) : NULL, wc, M, K, N);
        if (apart && dw) kernels->block_copy(dw, stride, dwc, N, chunks, K, row0, 0, N, 0);
        if (apart && db) kernels->block_copy(db, stride, dbc, N, chunks, 1, row0, 0, N, 0);
        scratch_done(side, n_apart);
        scratch_done(rounded, n_round);
        return;
    }
    for (int i = chunks - 1; i >= 0; i--) { /* (the order of one node a chunk) */
        if (!out[i]->grad) continue;
        if (out[i]->grad_bf16) op_widen_grad(out[i]);
        linear_rows_backward(x, w, b, out[i]->grad, row0 + i * stride, N);
    }
}

tensor *op_matmul(tensor *a, tensor *b, bool trans_a, bool trans_b, float alpha) {
    CHECK(a->ndim >= 2 && a->ndim == b->ndim, "matmul: shapes %s and %s", SHAPE_STR(a),
          SHAPE_STR(b));
    int nd = a->ndim;
    for (int i = 0; i < nd - 2; i++)
        CHECK(a->shape[i] == b->shape[i], "matmul: batch dims of %s and %s differ", SHAPE_STR(a),
              SHAPE_STR(b));
    int M = a->shape[nd - (trans_a ? 1 : 2)], K = a->shape[nd - (trans_a ? 2 : 1)];
    int Kb = b->shape[nd - (trans_b ? 1 : 2)], N = b->shape[nd - (trans_b ? 2 : 1)];
    CHECK(K == Kb, "matmul: inner dims differ: %s%s x %s%s", SHAPE_STR(a), trans_a ? "ᵀ" : "",
          SHAPE_STR(b), trans_b ? "ᵀ" : "");
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < nd - 2; i++) shape[i] = a->shape[i];
    shape[nd - 2] = M;
    shape[nd - 1] = N;
    int batch = (int)tensor_span(a, 0, nd - 2);
    tensor *out = tensor_new(nd, shape);
    kernels->matmul_forward(out->data, a->data, b->data, batch, M, N, K, trans_a, trans_b, alpha);
    op_macs += (double)batch * M * N * K;
    tape_node *n = tape_record(OP_MATMUL, out, 2, (tensor *[]){a, b});
    if (n) {
        n->iarg[0] = batch, n->iarg[1] = M, n->iarg[2] = N, n->iarg[3] = K;
        n->iarg[4] = trans_a, n->iarg[5] = trans_b;
        n->farg[0] = alpha;
    }
    return out;
}

void op_matmul_backward(tape_node *n) {
    tensor *a = n->in[0], *b = n->in[1];
    kernels->matmul_backward(a->requires_grad ? tensor_grad(a) : NULL, b->requires_grad ? tensor_grad(b) : NULL,
                    n->out->grad, a->data, b->data, n->iarg[0], n->iarg[1], n->iarg[2], n->iarg[3],
                    n->iarg[4], n->iarg[5], n->farg[0]);
}
