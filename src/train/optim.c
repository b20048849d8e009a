#include "optim.h"

#include <math.h>
#include <string.h>

#include "../core/check.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool param_decays(const tensor *p) {
    if (p->ndim <= 1 || ends_with(p->name, ".bias")) return false;
    static const char *const no_decay[] = {"pos_embed", "cls_token", "relative_position_bias_table",
                                           "absolute_pos_embed"};
    for (size_t i = 0; i < sizeof(no_decay) / sizeof(no_decay[0]); i++)
        if (ends_with(p->name, no_decay[i])) return false;
    return true;
}

void adamw_init(adamw *o, const param_store *ps, double weight_decay, double beta1, double beta2,
                double eps) {
    memset(o, 0, sizeof(*o));
    o->numel = ps->numel;
    o->m = xcalloc((size_t)ps->numel, sizeof(float));
    o->v = xcalloc((size_t)ps->numel, sizeof(float));
    o->decay = xmalloc(sizeof(float) * (size_t)ps->numel);
    for (int i = 0; i < ps->n; i++) {
        const tensor *p = ps->params[i];
        float d = param_decays(p) ? 1.0f : 0.0f;
        int64_t off = p->data - ps->data;
        for (int64_t j = 0; j < p->numel; j++) o->decay[off + j] = d;
    }
    o->weight_decay = weight_decay;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
}

void adamw_free(adamw *o) {
    free(o->m);
    free(o->v);
    free(o->decay);
    memset(o, 0, sizeof(*o));
}

void adamw_step(adamw *o, param_store *ps, double lr) {
    o->step++;
    /* torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float decay = (float)(lr * o->weight_decay);
    const double bc1 = 1.0 - pow(o->beta1, (double)o->step), bc2 = 1.0 - pow(o->beta2, (double)o->step);
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float *p = ps->data, *g = ps->grad, *m = o->m, *v = o->v, *dm = o->decay;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < o->numel; i++) {
        p[i] *= 1.0f - decay * dm[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

double clip_grad_norm(param_store *ps, double max_norm) {
    double sq = 0;
    const float *g = ps->grad;
    /* fixed chunks summed in order: the same norm whatever the thread count */
    enum { CHUNKS = 64 };
    double part[CHUNKS] = {0};
    int64_t n = ps->numel, per = (n + CHUNKS - 1) / CHUNKS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < CHUNKS; c++) {
        int64_t lo = c * per, hi = lo + per < n ? lo + per : n;
        double s = 0;
        for (int64_t i = lo; i < hi; i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    for (int c = 0; c < CHUNKS; c++) sq += part[c];
    double norm = sqrt(sq);
    double coef = max_norm / (norm + 1e-6); /* as torch: clip only when coef < 1 */
    if (max_norm > 0 && coef < 1.0) {
        float scale = (float)coef;
        float *gw = ps->grad;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) gw[i] *= scale;
    }
    return norm;
}

void ema_update(float *ema, const param_store *ps, double decay) {
    const float d = (float)decay, rest = (float)(1.0 - decay);
    const float *p = ps->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < ps->numel; i++) ema[i] = ema[i] * d + rest * p[i];
}

double lr_at(const lr_schedule *s, int64_t t) {
    if (t < s->warmup_steps)
        return s->warmup_lr + (double)t * (s->base_lr - s->warmup_lr) / (double)s->warmup_steps;
    if (t >= s->total_steps) return s->min_lr;
    return s->min_lr + 0.5 * (s->base_lr - s->min_lr) * (1.0 + cos(M_PI * (double)t / (double)s->total_steps));
}
