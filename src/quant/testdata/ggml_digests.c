// Digests of ggml's reference quantizers, dequantizers and generic dot products on fixed
// pseudo-random inputs: the source of the digests in ggml_golden_test.cpp, which rebuilds the
// same inputs. Not built by CMake. To regenerate, in a llama.cpp checkout at
// c392e5094deaf2d1a7c18683214f007fad3fe42b, on x86-64 with no -march (so that the generic
// dot products are the ones compiled, and nothing is fused into an FMA):
//   cd ggml && F="-O2 -std=gnu11 -ffp-contract=off -I include -I src -I src/ggml-cpu"
//   gcc $F -c src/ggml-quants.c src/ggml-cpu/ggml-cpu-quants.c <this dir>/ggml_digests.c
//   gcc -o ggml_digests ggml-quants.o ggml-cpu-quants.o ggml_digests.o -lcrypto -lm
//   ./ggml_digests
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <openssl/sha.h>

#include "ggml.h"
#include "ggml-common.h"
#include "ggml-quants.h"
#include "ggml-cpu-quants.h"
#include "ggml-impl.h"

float ggml_table_f32_f16[1 << 16];
void ggml_abort(const char * file, int line, const char * fmt, ...) {
  (void)fmt;
  fprintf(stderr, "abort %s:%d\n", file, line);
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void)type; abort(); }

static uint64_t g_state;
static uint32_t next_u32(void) {
  g_state ^= g_state >> 12; g_state ^= g_state << 25; g_state ^= g_state >> 27;
  return (uint32_t)((g_state * 0x2545F4914F6CDD1DULL) >> 32);
}
static float uniform(void) { return (float)(int32_t)next_u32() * (1.0f / 2147483648.0f); }

#define N 49152  // three segments of 16384
static float X[N];

static void make_input(void) {
  g_state = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < N / 3; ++i) X[i] = uniform();
  for (int i = N / 3; i < 2 * N / 3; ++i) { float u = uniform(); X[i] = u * u * u * 4.0f; }
  for (int i = 2 * N / 3; i < N; ++i) {
    const int block = (i - 2 * N / 3) / 32;
    const float u = uniform();
    switch (block % 7) {
      case 0: X[i] = 0.0f; break;
      case 1: X[i] = 0.37f; break;
      case 2: X[i] = u * 1e-8f; break;
      case 3: X[i] = (i % 32 == 5) ? 50.0f : u * 0.01f; break;
      case 4: X[i] = u < 0 ? -u : u; break;
      default: X[i] = u; break;
    }
  }
}

static void print_hash(const char * what, const void * p, size_t n) {
  unsigned char h[32];
  SHA256(p, n, h);
  printf("%s ", what);
  for (int i = 0; i < 32; ++i) printf("%02x", h[i]);
  printf("\n");
}

// A block layout for random_blocks: the fp16 fields (byte offsets f16[0..n_f16)) get finite
// halves in [0.125, 8), those in signed_mask a random sign too; float_d: a float d in
// [2^-7, 2^-5) at byte 0 (Q8_K).
typedef struct {
  int bytes, elems;
  int f16[2];
  int n_f16, signed_mask, float_d;
} layout_t;

// Random bytes for N elements of blocks of layout l, with the fields above made finite.
static void random_blocks(uint8_t * p, const layout_t * l) {
  const int n_blocks = N / l->elems;
  for (int i = 0; i < n_blocks * l->bytes; ++i) p[i] = (uint8_t)(next_u32() & 0xff);
  for (int b = 0; b < n_blocks; ++b) {
    uint8_t * blk = p + b * l->bytes;
    for (int k = 0; k < l->n_f16; ++k) {
      uint16_t h = (uint16_t)(0x3000 + next_u32() % 0x1800);
      if (l->signed_mask & (1 << k)) h |= (uint16_t)(next_u32() & 0x8000);
      memcpy(blk + l->f16[k], &h, 2);
    }
    if (l->float_d) {
      uint32_t bits = 0x3c000000u + next_u32() % 0x01000000u;
      memcpy(blk, &bits, 4);
    }
  }
}

// The large input of the K quantizers' searches, whose rare tie-breaks need many blocks to
// show: sums of three uniforms, products of three (times 8), and uniforms around 30, in
// 65536-element runs. No a * b + c anywhere, so no compiler can fuse it differently.
#define N_LARGE (1 << 20)
static float X_LARGE[N_LARGE];

static void make_large_input(void) {
  g_state = 0x2545F4914F6CDD1DULL;
  for (int i = 0; i < N_LARGE; ++i) {
    const float a = uniform(), b = uniform(), c = uniform();
    switch ((i / 65536) % 3) {
      case 0: X_LARGE[i] = a + b + c; break;
      case 1: X_LARGE[i] = a * b * c * 8.0f; break;
      default: X_LARGE[i] = a + 30.0f; break;
    }
  }
}

static uint8_t Q[N_LARGE], W[N * 2], A[N * 2];
static float Y[N];

typedef void (*quant_fn)(const float *, void *, int64_t);
typedef void (*dequant_fn)(const void *, float *, int64_t);
typedef void (*dot_fn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

int main(void) {
  for (int i = 0; i < 65536; ++i) ggml_table_f32_f16[i] = ggml_compute_fp16_to_fp32((uint16_t)i);
  make_input();
  print_hash("input", X, sizeof(X));

  struct { const char * name; quant_fn q; dequant_fn dq; int bytes, elems; } qs[] = {
    {"q4_0", (quant_fn)quantize_row_q4_0_ref, (dequant_fn)dequantize_row_q4_0, 18, 32},
    {"q4_1", (quant_fn)quantize_row_q4_1_ref, (dequant_fn)dequantize_row_q4_1, 20, 32},
    {"q5_0", (quant_fn)quantize_row_q5_0_ref, (dequant_fn)dequantize_row_q5_0, 22, 32},
    {"q5_1", (quant_fn)quantize_row_q5_1_ref, (dequant_fn)dequantize_row_q5_1, 24, 32},
    {"q8_0", (quant_fn)quantize_row_q8_0_ref, (dequant_fn)dequantize_row_q8_0, 34, 32},
    {"q8_1", (quant_fn)quantize_row_q8_1_ref, NULL, 36, 32},
    {"q4_K", (quant_fn)quantize_row_q4_K_ref, (dequant_fn)dequantize_row_q4_K, 144, 256},
    {"q5_K", (quant_fn)quantize_row_q5_K_ref, (dequant_fn)dequantize_row_q5_K, 176, 256},
    {"q6_K", (quant_fn)quantize_row_q6_K_ref, (dequant_fn)dequantize_row_q6_K, 210, 256},
    {"q8_K", (quant_fn)quantize_row_q8_K_ref, (dequant_fn)dequantize_row_q8_K, 292, 256},
    // Added later (no random stream here, so the lines above are unchanged).
    {"q2_K", (quant_fn)quantize_row_q2_K_ref, (dequant_fn)dequantize_row_q2_K, 84, 256},
    {"q3_K", (quant_fn)quantize_row_q3_K_ref, (dequant_fn)dequantize_row_q3_K, 110, 256},
    {"iq4_nl", (quant_fn)quantize_row_iq4_nl_ref, (dequant_fn)dequantize_row_iq4_nl, 18, 32},
    {"iq4_xs", (quant_fn)quantize_row_iq4_xs_ref, (dequant_fn)dequantize_row_iq4_xs, 136, 256},
  };
  for (size_t t = 0; t < sizeof(qs) / sizeof(qs[0]); ++t) {
    const int nbytes = N / qs[t].elems * qs[t].bytes;
    memset(Q, 0, sizeof(Q));
    qs[t].q(X, Q, N);
    char label[64];
    snprintf(label, sizeof(label), "quantize_%s", qs[t].name);
    print_hash(label, Q, (size_t)nbytes);
    if (qs[t].dq) {
      qs[t].dq(Q, Y, N);
      snprintf(label, sizeof(label), "roundtrip_%s", qs[t].name);
      print_hash(label, Y, sizeof(Y));
    }
  }

  make_large_input();
  print_hash("large_input", X_LARGE, sizeof(X_LARGE));
  for (size_t t = 6; t < 14; ++t) {  // q4_K, q5_K, q6_K, then (added later) q2_K, q3_K, iq4_*
    if (t == 9) continue;  // q8_K
    const int nbytes = N_LARGE / qs[t].elems * qs[t].bytes;
    qs[t].q(X_LARGE, Q, N_LARGE);
    char label[64];
    snprintf(label, sizeof(label), "quantize_large_%s", qs[t].name);
    print_hash(label, Q, (size_t)nbytes);
  }

  // Dequantization of random bytes (finite scales).
  struct { const char * name; dequant_fn dq; layout_t l; } ds[] = {
    {"q4_0", (dequant_fn)dequantize_row_q4_0, {18, 32, {0}, 1, 0, 0}},
    {"q4_1", (dequant_fn)dequantize_row_q4_1, {20, 32, {0, 2}, 2, 2, 0}},
    {"q5_0", (dequant_fn)dequantize_row_q5_0, {22, 32, {0}, 1, 0, 0}},
    {"q5_1", (dequant_fn)dequantize_row_q5_1, {24, 32, {0, 2}, 2, 2, 0}},
    {"q8_0", (dequant_fn)dequantize_row_q8_0, {34, 32, {0}, 1, 0, 0}},
    {"q2_K", (dequant_fn)dequantize_row_q2_K, {84, 256, {80, 82}, 2, 0, 0}},
    {"q3_K", (dequant_fn)dequantize_row_q3_K, {110, 256, {108}, 1, 0, 0}},
    {"q4_K", (dequant_fn)dequantize_row_q4_K, {144, 256, {0, 2}, 2, 0, 0}},
    {"q5_K", (dequant_fn)dequantize_row_q5_K, {176, 256, {0, 2}, 2, 0, 0}},
    {"q6_K", (dequant_fn)dequantize_row_q6_K, {210, 256, {208}, 1, 0, 0}},
    {"q8_K", (dequant_fn)dequantize_row_q8_K, {292, 256, {0}, 0, 0, 1}},
    {"iq4_nl", (dequant_fn)dequantize_row_iq4_nl, {18, 32, {0}, 1, 0, 0}},
    {"iq4_xs", (dequant_fn)dequantize_row_iq4_xs, {136, 256, {0}, 1, 0, 0}},
  };
  g_state = 0xD1B54A32D192ED03ULL;
  for (size_t t = 0; t < sizeof(ds) / sizeof(ds[0]); ++t) {
    random_blocks(W, &ds[t].l);
    ds[t].dq(W, Y, N);
    char label[64];
    snprintf(label, sizeof(label), "dequantize_%s", ds[t].name);
    print_hash(label, Y, sizeof(Y));
  }

  // Generic dot products: random weights against activations quantized from X, one result per
  // 256-element row and one over all N.
  struct { const char * name; dot_fn dot; quant_fn qa; int a_bytes; layout_t l; } dots[] = {
    {"q4_0_q8_0", ggml_vec_dot_q4_0_q8_0, (quant_fn)quantize_row_q8_0_ref, 34,
     {18, 32, {0}, 1, 0, 0}},
    {"q4_1_q8_1", ggml_vec_dot_q4_1_q8_1, (quant_fn)quantize_row_q8_1_ref, 36,
     {20, 32, {0, 2}, 2, 2, 0}},
    {"q8_0_q8_0", ggml_vec_dot_q8_0_q8_0, (quant_fn)quantize_row_q8_0_ref, 34,
     {34, 32, {0}, 1, 0, 0}},
    {"q4_K_q8_K", ggml_vec_dot_q4_K_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {144, 256, {0, 2}, 2, 0, 0}},
    {"q5_K_q8_K", ggml_vec_dot_q5_K_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {176, 256, {0, 2}, 2, 0, 0}},
    {"q6_K_q8_K", ggml_vec_dot_q6_K_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {210, 256, {208}, 1, 0, 0}},
    // Added later, after the cases above (whose digests are unchanged, the stream continuing).
    {"q5_0_q8_0", ggml_vec_dot_q5_0_q8_0, (quant_fn)quantize_row_q8_0_ref, 34,
     {22, 32, {0}, 1, 0, 0}},
    {"q5_1_q8_1", ggml_vec_dot_q5_1_q8_1, (quant_fn)quantize_row_q8_1_ref, 36,
     {24, 32, {0, 2}, 2, 2, 0}},
    {"q2_K_q8_K", ggml_vec_dot_q2_K_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {84, 256, {80, 82}, 2, 0, 0}},
    {"q3_K_q8_K", ggml_vec_dot_q3_K_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {110, 256, {108}, 1, 0, 0}},
    {"iq4_nl_q8_0", ggml_vec_dot_iq4_nl_q8_0, (quant_fn)quantize_row_q8_0_ref, 34,
     {18, 32, {0}, 1, 0, 0}},
    {"iq4_xs_q8_K", ggml_vec_dot_iq4_xs_q8_K, (quant_fn)quantize_row_q8_K_ref, 292,
     {136, 256, {0}, 1, 0, 0}},
  };
  g_state = 0x94D049BB133111EBULL;
  for (size_t t = 0; t < sizeof(dots) / sizeof(dots[0]); ++t) {
    const layout_t * l = &dots[t].l;
    random_blocks(W, l);
    dots[t].qa(X, A, N);
    float r[N / 256 + 1];
    const int row_w = 256 / l->elems * l->bytes, row_a = 256 / l->elems * dots[t].a_bytes;
    for (int i = 0; i < N / 256; ++i) {
      dots[t].dot(256, &r[i], 0, W + i * row_w, 0, A + i * row_a, 0, 1);
    }
    dots[t].dot(N, &r[N / 256], 0, W, 0, A, 0, 1);
    uint32_t bits; memcpy(&bits, &r[N / 256], 4);
    printf("dot_%s_all %08x\n", dots[t].name, bits);
    char label[64];
    snprintf(label, sizeof(label), "dot_%s_rows", dots[t].name);
    print_hash(label, r, sizeof(float) * (N / 256));
  }
  return 0;
}
