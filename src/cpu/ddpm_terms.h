/* One element of DiT's training loss (facebookresearch/DiT, diffusion/gaussian_diffusion.py with
 * learned-range variance and loss "MSE"): the mean term (eps - eps_hat)^2 plus the variational bound
 * term in bits, KL(q(x_{t-1} | x_t, x_0) || p(x_{t-1} | x_t)) or, at t = 0, the discretised Gaussian
 * decoder NLL, both with eps_hat held fixed (the official frozen_out). Shared by the CPU kernel and
 * the CUDA one, so both compute the same thing. */
#pragma once
#include <math.h>

#ifdef __host__ /* compiled by nvcc (or the CUDA emulator): callable from kernels too */
#define DDPM_FN static inline __host__ __device__
#else
#define DDPM_FN static inline
#endif

/* the per-sample coefficients of its time step t, DDPM_COEFS floats a sample */
enum {
    DDPM_SQRT_RECIP_AC,   /* sqrt(1 / alphas_cumprod[t]) */
    DDPM_SQRT_RECIPM1_AC, /* sqrt(1 / alphas_cumprod[t] - 1) */
    DDPM_POST_COEF1,      /* posterior mean = coef1 x_0 + coef2 x_t */
    DDPM_POST_COEF2,
    DDPM_POST_LOGVAR,     /* log posterior variance, clipped at t = 0: the variance range's low end */
    DDPM_LOG_BETA,        /* log beta_t: its high end */
    DDPM_FIRST,           /* 1 at t = 0 (the decoder NLL), else 0 (the KL) */
    DDPM_COEFS
};

/* The official tanh approximation of the standard normal CDF, and its derivative */
DDPM_FN double ddpm_cdf(double z, double *slope) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    double th = tanh(k * (z + 0.044715 * z * z * z));
    *slope = 0.5 * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * z * z);
    return 0.5 * (1.0 + th);
}

/* log(max(p, 1e-12)) as the official clamp, and its derivative in p */
DDPM_FN double ddpm_log_clamped(double p, double *dlog) {
    *dlog = p > 1e-12 ? 1.0 / p : 0.0;
    return log(p > 1e-12 ? p : 1e-12);
}

/* -log P(x0 in its 1/255 bin) under N(mean, exp(log_scale)^2) (x0 in [-1, 1], the edge bins
 * open-ended) and its derivative in log_scale */
DDPM_FN double ddpm_decoder_nll(double x0, double mean, double log_scale, double *dscale) {
    double inv = exp(-log_scale), c = x0 - mean;
    double plus = inv * (c + 1.0 / 255.0), minus = inv * (c - 1.0 / 255.0), sp, sm, dl, lp;
    double cdf_plus = ddpm_cdf(plus, &sp), cdf_minus = ddpm_cdf(minus, &sm);
    /* d plus / d log_scale = -plus, and the same for minus */
    if (x0 < -0.999) {
        lp = ddpm_log_clamped(cdf_plus, &dl);
        *dscale = dl * sp * plus;
    } else if (x0 > 0.999) {
        lp = ddpm_log_clamped(1.0 - cdf_minus, &dl);
        *dscale = -dl * sm * minus;
    } else {
        lp = ddpm_log_clamped(cdf_plus - cdf_minus, &dl);
        *dscale = dl * (sp * plus - sm * minus);
    }
    return -lp;
}

/* p(x_{t-1} | x_t) of one element: the mean from the network's eps_hat e through the predicted x0,
 * and (*logvar) the log variance placed by v in [-1, 1] between the posterior's and log beta_t */
DDPM_FN double ddpm_model_mean(const float *k, double xt, double e, double v, double *logvar) {
    double frac = 0.5 * (v + 1.0);
    *logvar = frac * k[DDPM_LOG_BETA] + (1.0 - frac) * k[DDPM_POST_LOGVAR];
    double pred_x0 = k[DDPM_SQRT_RECIP_AC] * xt - k[DDPM_SQRT_RECIPM1_AC] * e;
    return k[DDPM_POST_COEF1] * pred_x0 + k[DDPM_POST_COEF2] * xt;
}

/* The loss terms of one element (mean term + bound term in bits) given the network's eps_hat e and
 * variance value v in [-1, 1] (nominally), the data x0, the noisy x_t and the drawn noise eps; *de
 * and *dv: their derivatives in e (the mean term's only) and v. */
DDPM_FN double ddpm_element(const float *k, double e, double v, double x0, double xt, double eps,
                            double *de, double *dv) {
    const double ln2 = 0.6931471805599453;
    double min_log = k[DDPM_POST_LOGVAR], dlogvar_dv = 0.5 * (k[DDPM_LOG_BETA] - min_log);
    double logvar, mean = ddpm_model_mean(k, xt, e, v, &logvar), bound, dbound;
    if (k[DDPM_FIRST] != 0) {
        double ds;
        bound = ddpm_decoder_nll(x0, mean, 0.5 * logvar, &ds);
        dbound = 0.5 * ds;
    } else { /* KL of N(true_mean, e^min_log) from N(mean, e^logvar) */
        double true_mean = k[DDPM_POST_COEF1] * x0 + k[DDPM_POST_COEF2] * xt, d = true_mean - mean;
        double r = exp(min_log - logvar), q = d * d * exp(-logvar);
        bound = 0.5 * (-1.0 + logvar - min_log + r + q);
        dbound = 0.5 * (1.0 - r - q);
    }
    *de = 2.0 * (e - eps);
    *dv = dbound * dlogvar_dv / ln2;
    return (e - eps) * (e - eps) + bound / ln2;
}
