/* The time-step-wise mediator schedule of Attention Mediators (LeapLabTHU/Attention-Mediators'
 * SwitchModelThree; ../shared/specs/mediators.md §4): two or three separately trained networks of
 * increasing mediator count sample together, one at a time, starting with the first (few mediators
 * for the noisy early steps) and moving, never back, to the next ones as the SDE state settles.
 *
 * The rule: with x_k the state after SDE step k (k = 0, 1, ...), d_k = the mean of |x_k - x_{k-1}|
 * (or of its square) over every element of the batch; mu = the mean of d_1 .. d_K; for every
 * k >= K + 1, while network i < last is active and d_k < ratio[i] mu, switch to network i + 1 (so
 * one step can switch twice), from step k + 1 on. The official code runs it in its SDE loop only. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "transport.h"

#define SCHEDULE_MAX_NETS 3

typedef struct mediator_schedule {
    int n_nets;    /* 2 or 3 */
    int calibrate; /* K: the distances d_1 .. d_K whose mean is mu */
    double ratio[SCHEDULE_MAX_NETS - 1]; /* rho1 (> rho2): leave network i when d < ratio[i] mu */
    double sum;    /* d_1 + ... while calibrating */
    int active;    /* the network in use */
    int switched_after[SCHEDULE_MAX_NETS - 1]; /* the step k that moved to network i + 1; -1: never */
} mediator_schedule;

void mediator_schedule_init(mediator_schedule *s, int n_nets, int calibrate, const double *ratio);
/* d: d_k, the distance of step k >= 1 to the step before */
void mediator_schedule_observe(mediator_schedule *s, int k, double d);

/* The networks of a schedule as one velocity for transport_sample (velocity ctx and its
 * after_step), counting each network's evaluations */
typedef struct scheduled_nets {
    transport_net nets[SCHEDULE_MAX_NETS];
    mediator_schedule sched;
    bool squared;        /* the distance: mean squared (the official "mse") instead of mean absolute */
    float *prev;         /* the state after the previous step (B * per floats, the caller's) */
    int64_t evals[SCHEDULE_MAX_NETS]; /* batch evaluations by each network */
} scheduled_nets;
void scheduled_nets_velocity(void *ctx, const float *x, float t, int B, float *v);
void scheduled_nets_after_step(void *ctx, int k, const float *x, int64_t n);
