#include "mediator_schedule.h"

#include <math.h>
#include <string.h>

#include "../core/check.h"

void mediator_schedule_init(mediator_schedule *s, int n_nets, int calibrate, const double *ratio) {
    CHECK(n_nets >= 2 && n_nets <= SCHEDULE_MAX_NETS, "mediator schedule: %d networks (2 or 3)", n_nets);
    CHECK(calibrate >= 1, "mediator schedule: %d calibration steps (at least 1)", calibrate);
    *s = (mediator_schedule){.n_nets = n_nets, .calibrate = calibrate};
    for (int i = 0; i < n_nets - 1; i++) {
        s->ratio[i] = ratio[i];
        s->switched_after[i] = -1;
    }
}

void mediator_schedule_observe(mediator_schedule *s, int k, double d) {
    if (k < 1) return; /* step 0 has no step before it */
    if (k <= s->calibrate) {
        s->sum += d;
        return;
    }
    double mu = s->sum / s->calibrate;
    while (s->active < s->n_nets - 1 && d < s->ratio[s->active] * mu) s->switched_after[s->active++] = k;
}

void scheduled_nets_velocity(void *ctx, const float *x, float t, int B, float *v) {
    scheduled_nets *s = ctx;
    s->evals[s->sched.active]++;
    transport_net_velocity(&s->nets[s->sched.active], x, t, B, v);
}

void scheduled_nets_after_step(void *ctx, int k, const float *x, int64_t n) {
    scheduled_nets *s = ctx;
    if (k > 0) {
        double d = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = (double)x[i] - s->prev[i];
            d += s->squared ? e * e : fabs(e);
        }
        mediator_schedule_observe(&s->sched, k, d / (double)n);
    }
    memcpy(s->prev, x, sizeof(float) * (size_t)n);
}
