/* Writes tests/fixtures/quant/ggml_blocks.bin: GGML's own blocks and dequantized values for a fixed
 * pseudo-random input, one set per weight type zaya has (docs/quantization.md, "How the fixture
 * was made"). A one-time generator, not part of the build or CI: make.sh compiles it against a
 * GGML build and runs it; tests/quant/test_formats.cpp reads the file.
 *
 * It calls only GGML's public API (ggml.h): ggml_quantize_chunk without an importance matrix (the
 * reference quantizers) and the type traits' to_float (the reference dequantizers).
 *
 * File layout, little-endian:
 *   "ZQGB" · u32 version (1) · u32 rows · u32 cols · u32 ntypes · f32 input[rows·cols]
 *   then per type: u32 ggml_type · u64 nbytes · u8 blocks[nbytes] · f32 dequantized[rows·cols]
 * The input's four rows are four kinds of weights: gaussian, uniform (offset from zero, so that
 * its blocks are lopsided), gaussian with 1% outliers 20 times larger, and heavy-tailed (a gaussian
 * times a log-normal factor); row r has the scale 0.02·(r + 1). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

enum { ROWS = 4, COLS = 512 };

static uint64_t rng_state = 0x5a4159415f514e54ull; /* fixed seed */

static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

static double gaussian(void) { /* Box-Muller */
    double u = uniform01(), v = uniform01();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void make_input(float * x) {
    for (int r = 0; r < ROWS; ++r) {
        const double scale = 0.02 * (1 + r), offset = (r == 1) ? 0.01 : 0.0;
        for (int c = 0; c < COLS; ++c) {
            double v;
            switch (r % 4) {
                case 0: v = gaussian(); break;
                case 1: v = 2.0 * uniform01() - 1.0; break;
                case 2: v = gaussian() * (uniform01() < 0.01 ? 20.0 : 1.0); break;
                default: v = gaussian() * exp(0.75 * gaussian()); break;
            }
            x[r * COLS + c] = (float)(scale * v + offset);
        }
    }
}

static void put(FILE * f, const void * p, size_t n) {
    if (fwrite(p, 1, n, f) != n) {
        perror("write");
        exit(1);
    }
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
        return 2;
    }
    static const enum ggml_type types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16,
                                           GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
                                           GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                                           GGML_TYPE_IQ4_XS};
    const uint32_t ntypes = sizeof types / sizeof types[0];
    static float input[ROWS * COLS], out[ROWS * COLS];
    make_input(input);

    FILE * f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    const uint32_t head[5] = {0x4247515a /* "ZQGB" */, 1, ROWS, COLS, ntypes};
    put(f, head, sizeof head);
    put(f, input, sizeof input);
    for (uint32_t t = 0; t < ntypes; ++t) {
        const enum ggml_type type = types[t];
        const uint64_t nbytes = ggml_row_size(type, COLS) * ROWS;
        void * blocks = calloc(1, nbytes);
        const size_t wrote = ggml_quantize_chunk(type, input, blocks, 0, ROWS, COLS, NULL);
        if (wrote != nbytes) {
            fprintf(stderr, "%s: %zu bytes, expected %llu\n", ggml_type_name(type), wrote,
                    (unsigned long long)nbytes);
            return 1;
        }
        const struct ggml_type_traits * tr = ggml_get_type_traits(type);
        for (int r = 0; r < ROWS; ++r) {
            const char * row = (const char *)blocks + r * ggml_row_size(type, COLS);
            if (tr->to_float)
                tr->to_float(row, out + r * COLS, COLS);
            else /* F32 has no conversion */
                memcpy(out + r * COLS, row, COLS * sizeof(float));
        }
        const uint32_t id = (uint32_t)type;
        put(f, &id, 4);
        put(f, &nbytes, 8);
        put(f, blocks, nbytes);
        put(f, out, sizeof out);
        free(blocks);
        printf("%-7s %6llu bytes\n", ggml_type_name(type), (unsigned long long)nbytes);
    }
    fclose(f);
    return 0;
}
