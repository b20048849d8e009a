#include "optim.h"

#include <math.h>
#include <string.h>

#include "../core/check.h"
#include "../core/memory.h"
#include "../ops/kernels.h"

bool param_decays(const tensor *p) {
    if (p->ndim <= 1 || param_name_ends_with(p->name, ".bias")) return false;
    static const char *const no_decay[] = {"pos_embed", "cls_token", "relative_position_bias_table",
                                           "absolute_pos_embed"};
    for (size_t i = 0; i < sizeof(no_decay) / sizeof(no_decay[0]); i++)
        if (param_name_ends_with(p->name, no_decay[i])) return false;
    return true;
}

void adamw_init(adamw *o, const param_store *ps, double weight_decay, double beta1, double beta2,
                double eps) {
    memset(o, 0, sizeof(*o));
    const memory_ops *mem = o->mem = ps->mem; /* beside the parameters */
    size_t bytes = sizeof(float) * (size_t)ps->span, lines = (size_t)ps->span / PARAM_LINE_FLOATS;
    CHECK(ps->span % PARAM_LINE_FLOATS == 0, "adamw: %lld parameter floats are not whole lines",
          (long long)ps->span);
    o->numel = ps->span;
    o->m = mem->alloc(bytes), o->v = mem->alloc(bytes), o->decay = mem->alloc(lines);
    mem->zero(o->m, bytes), mem->zero(o->v, bytes);
    uint8_t *decay = xcalloc(1, lines); /* 0 between the parameters */
    for (int i = 0; i < ps->n; i++) {
        const tensor *p = ps->params[i];
        int64_t first = (p->data - ps->data) / PARAM_LINE_FLOATS;
        uint8_t d = param_decays(p);
        for (int64_t l = 0; l * PARAM_LINE_FLOATS < p->numel; l++) decay[first + l] = d;
    }
    mem->from_host(o->decay, decay, lines);
    free(decay);
    o->weight_decay = weight_decay;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
}

void adamw_free(adamw *o) {
    o->mem->free(o->m), o->mem->free(o->v), o->mem->free(o->decay);
    memset(o, 0, sizeof(*o));
}

void adamw_step(adamw *o, param_store *ps, double lr) {
    o->step++;
    kernels->adamw_update(ps->data, o->m, o->v, ps->grad, o->decay, PARAM_LINE_FLOATS, o->numel, lr,
                          o->beta1, o->beta2, o->eps, o->weight_decay, o->step);
}

double clip_grad_norm(param_store *ps, double max_norm) {
    double norm = sqrt(kernels->sum_squares(ps->grad, ps->span));
    double coef = max_norm / (norm + 1e-6); /* as torch: clip only when coef < 1 */
    if (max_norm > 0 && coef < 1.0) kernels->scale_floats(ps->grad, ps->span, (float)coef);
    return norm;
}

void ema_update(float *ema, const param_store *ps, double decay) {
    kernels->ema_update_flat(ema, ps->data, ps->span, decay);
}

double lr_at(const lr_schedule *s, int64_t t) {
    if (t < s->warmup_steps)
        return s->warmup_lr + (double)t * (s->base_lr - s->warmup_lr) / (double)s->warmup_steps;
    if (t >= s->total_steps) return s->min_lr;
    return s->min_lr + 0.5 * (s->base_lr - s->min_lr) * (1.0 + cos(M_PI * (double)t / (double)s->total_steps));
}
