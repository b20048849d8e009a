#include "amx.h"

#if defined(VITC_BF16_KERNELS) && VITC_AMX_KERNELS
#define AMX_TARGET                                                                                 \
    __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))

/* the 64-byte operand of ldtilecfg (palette 1) */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* (GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes of the configuration, which then
 * drops the stores of the rest: the whole struct is the asm's operand here) */
AMX_TARGET void amx_begin(void) {
    tile_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

AMX_TARGET void amx_end(void) { _tile_release(); }

/* 16 rows of a's words u0..u0 + n (n <= 16) into a full tile's worth, zero past n and from row
 * `rows` on */
AMX_TARGET static void edge_rows(uint32_t out[16 * 16], const uint32_t *a, size_t lda, int rows,
                                 int u0, int n) {
    for (int r = 0; r < 16; r++)
        _mm512_storeu_si512(out + 16 * r, r < rows ? _mm512_maskz_loadu_epi32(lanes(n),
                                                                               a + r * lda + u0)
                                                   : _mm512_setzero_si512());
}

/* Tiles: sums in tmm0-3 (rows 0-15 | 16-31 x columns 0-15 | 16-31), a's two row groups in tmm4
 * and 5, b's two column groups in tmm6 and 7; a chunk of fewer than 16 words, or a row or column
 * group cut short, is copied zero-padded into a full tile first. tmm0-3 hold their starting values
 * on entry. */
AMX_TARGET static inline void multiply(const uint32_t *a, size_t lda, const uint32_t *b, size_t ldb,
                                       int words, int rows, int cols) {
    uint32_t a_edge[16 * 16] __attribute__((aligned(64)));
    uint32_t b_edge[2][16 * 16] __attribute__((aligned(64)));
    const int a_stride = (int)(lda * sizeof(uint32_t)), b_stride = (int)(ldb * sizeof(uint32_t));
    bool lower = rows > 16, right = cols > 16;
    for (int u0 = 0; u0 < words; u0 += 16) {
        int n = words - u0 < 16 ? words - u0 : 16;
        const uint32_t *bu = b + u0 * ldb;
        if (n == 16 && cols >= 16) {
            _tile_loadd(6, bu, b_stride);
        } else {
            edge_rows(b_edge[0], bu, ldb, n, 0, cols);
            _tile_loadd(6, b_edge[0], 64);
        }
        if (right) {
            if (n == 16 && cols >= 32) {
                _tile_loadd(7, bu + 16, b_stride);
            } else {
                edge_rows(b_edge[1], bu + 16, ldb, n, 0, cols - 16);
                _tile_loadd(7, b_edge[1], 64);
            }
        }
        if (n == 16 && rows >= 16) {
            _tile_loadd(4, a + u0, a_stride);
        } else {
            edge_rows(a_edge, a, lda, rows, u0, n);
            _tile_loadd(4, a_edge, 64);
        }
        _tile_dpbf16ps(0, 4, 6);
        if (right) _tile_dpbf16ps(1, 4, 7);
        if (!lower) continue;
        if (n == 16 && rows >= 32) {
            _tile_loadd(5, a + 16 * lda + u0, a_stride);
        } else {
            edge_rows(a_edge, a + 16 * lda, lda, rows - 16, u0, n);
            _tile_loadd(5, a_edge, 64);
        }
        _tile_dpbf16ps(2, 5, 6);
        if (right) _tile_dpbf16ps(3, 5, 7);
    }
}

AMX_TARGET void amx_sums(float *sums, const uint32_t *a, size_t lda, const uint32_t *b, size_t ldb,
                         int words, int rows, int cols) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    multiply(a, lda, b, ldb, words, rows, cols);
    const int stride = AMX_COLS * sizeof(float);
    _tile_stored(0, sums, stride);
    if (cols > 16) _tile_stored(1, sums + 16, stride);
    if (rows <= 16) return;
    _tile_stored(2, sums + 16 * AMX_COLS, stride);
    if (cols > 16) _tile_stored(3, sums + 16 * AMX_COLS + 16, stride);
}

/* The tiles' starting values, and the results' way back to c: a 16 x 16 block of c that lies
 * inside the rows and columns goes straight between c and its tile; an edge block through a
 * buffer, masked. A bias's 16 columns are loaded from the bias itself (stride 0): a tile load of
 * lines just stored waits until the stores reach the cache, which took a quarter of this
 * function's time in the MLP's fc1 chunks when every bias went through the buffer. The tile
 * numbers are immediates, hence the macros. */
#define START_TILE(t, g, h)                                                                        \
    do {                                                                                           \
        int r_ = rows - 16 * (g), c_ = cols - 16 * (h);                                           \
        float *at_ = c + 16 * (g) * ldc + 16 * (h);                                              \
        if (from_c && r_ >= 16 && c_ >= 16) {                                                      \
            _tile_loadd(t, at_, c_stride);                                                         \
        } else if (from_c) {                                                                       \
            for (int r = 0; r < 16; r++)                                                           \
                _mm512_store_ps(edge + 16 * r, _mm512_maskz_loadu_ps(r < r_ ? lanes(c_) : 0,      \
                                                                     at_ + r * ldc));             \
            _tile_loadd(t, edge, 64);                                                              \
        } else if (bias && c_ >= 16) {                                                             \
            _tile_loadd(t, bias + 16 * (h), 0);                                                    \
        } else if (bias) {                                                                         \
            _mm512_store_ps(edge, _mm512_maskz_loadu_ps(lanes(c_), bias + 16 * (h)));             \
            _tile_loadd(t, edge, 0);                                                               \
        } else {                                                                                   \
            _tile_zero(t);                                                                         \
        }                                                                                          \
    } while (0)

#define STORE_TILE(t, g, h)                                                                        \
    do {                                                                                           \
        int r_ = rows - 16 * (g), c_ = cols - 16 * (h);                                           \
        float *at_ = c + 16 * (g) * ldc + 16 * (h);                                              \
        if (r_ >= 16 && c_ >= 16) {                                                                \
            _tile_stored(t, at_, c_stride);                                                        \
        } else {                                                                                   \
            _tile_stored(t, edge, 64);                                                             \
            for (int r = 0; r < r_ && r < 16; r++)                                                 \
                _mm512_mask_storeu_ps(at_ + r * ldc, lanes(c_), _mm512_load_ps(edge + 16 * r));   \
        }                                                                                          \
    } while (0)

AMX_TARGET void amx_accumulate(float *c, size_t ldc, bool from_c, const float *bias,
                               const uint32_t *a, size_t lda, const uint32_t *b, size_t ldb,
                               int words, int rows, int cols) {
    float edge[16 * 16] __attribute__((aligned(64)));
    const int c_stride = (int)(ldc * sizeof(float));
    bool lower = rows > 16, right = cols > 16;
    START_TILE(0, 0, 0);
    if (right) START_TILE(1, 0, 1);
    if (lower) START_TILE(2, 1, 0);
    if (lower && right) START_TILE(3, 1, 1);
    multiply(a, lda, b, ldb, words, rows, (cols + 15) & ~15);
    STORE_TILE(0, 0, 0);
    if (right) STORE_TILE(1, 0, 1);
    if (lower) STORE_TILE(2, 1, 0);
    if (lower && right) STORE_TILE(3, 1, 1);
}
#endif
