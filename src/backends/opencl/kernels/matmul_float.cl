// Float weights: embedding lookup and y = W x, one set of kernels per stored type.
// Device layouts (cl_weights.cpp): F32 as float; F16 as half (read with vload_half, no fp16
// arithmetic needed); BF16 as ushort (widened by a shift); Q8_0 split into int8 quants `w`
// and one float scale per 32 elements `wd` (ggml: value = q * d). `wd` is unused otherwise.
// A weight larger than the device's largest buffer is split into row chunks; each kernel
// sees one chunk (rows row0 .. row0 + n_rows_chunk of the weight).

#define LOAD_F32(w, wd, i) (((__global const float*)(w))[i])
#define LOAD_F16(w, wd, i) vload_half((i), (__global const half*)(w))
#define LOAD_BF16(w, wd, i) as_float(((uint)((__global const ushort*)(w))[i]) << 16)
#define LOAD_Q8_0(w, wd, i) ((float)((__global const char*)(w))[i] * (wd)[(i) / 32])

// Global size (n_cols, n_tokens): dst[t] = row tokens[t] of the weight, if it is in this chunk.
#define DEFINE_EMBED(NAME, LOAD)                                                                  \
  __kernel void embed_##NAME(__global float* dst, __global const int* tokens,                    \
                             __global const void* w, __global const float* wd, int n_cols,        \
                             int row0, int n_rows_chunk) {                                        \
    const int c = get_global_id(0);                                                               \
    const int t = get_global_id(1);                                                               \
    const int r = tokens[t] - row0;                                                               \
    if (c >= n_cols || r < 0 || r >= n_rows_chunk) return;                                        \
    dst[(size_t)t * n_cols + c] = LOAD(w, wd, (size_t)r * n_cols + c);                            \
  }

// y[t][row0 + r] = sum_k w[r][k] * x[t][k], summed in the CPU reference's order (its dot_f32:
// 8 interleaved accumulators, combined pairwise, then the tail) so that float models match it
// bit for bit: 8 lanes per row, lane j accumulating elements j, j+8, ...; BITNET_WG / 8 rows per
// work-group, and BITNET_TOKEN_TILE tokens per work-group: each weight element is loaded (and,
// for the block formats of matmul_quant.cl, dequantized) once for the tile's tokens.
// Global (ceil(n_rows_chunk / (BITNET_WG / 8)) * BITNET_WG, ceil(n_tokens / BITNET_TOKEN_TILE)).
// y: [n_tokens][n_out]; x: [n_tokens][n_cols].
#define DEFINE_MATMUL(NAME, LOAD)                                                                 \
  BITNET_KERNEL void matmul_##NAME(__global float* y, __global const float* x,                   \
                                   __global const void* w, __global const float* wd, int n_cols,  \
                                   int n_out, int row0, int n_rows_chunk, int n_tokens) {         \
    __local float tmp[BITNET_TOKEN_TILE * BITNET_WG];                                             \
    const int lid = get_local_id(0);                                                              \
    const int lane = lid % 8;                                                                     \
    const int r = get_group_id(0) * (BITNET_WG / 8) + lid / 8;                                    \
    const int t0 = get_group_id(1) * BITNET_TOKEN_TILE;                                           \
    const int nt = min(BITNET_TOKEN_TILE, n_tokens - t0);                                         \
    const int n8 = n_cols / 8 * 8;                                                                \
    const size_t w0 = (size_t)r * n_cols;                                                         \
    __global const float* xt = x + (size_t)t0 * n_cols;                                           \
    float acc[BITNET_TOKEN_TILE];                                                                 \
    for (int t = 0; t < BITNET_TOKEN_TILE; ++t) acc[t] = 0.0f;                                    \
    if (r < n_rows_chunk) {                                                                       \
      for (int i = 0; i < n8; i += 8) {                                                           \
        const float wv = LOAD(w, wd, w0 + i + lane);                                              \
        for (int t = 0; t < nt; ++t) acc[t] += wv * xt[(size_t)t * n_cols + i + lane];            \
      }                                                                                           \
    }                                                                                             \
    for (int t = 0; t < BITNET_TOKEN_TILE; ++t) tmp[t * BITNET_WG + lid] = acc[t];                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
    if (lane == 0 && r < n_rows_chunk) {                                                          \
      for (int t = 0; t < nt; ++t) {                                                              \
        __local const float* a = tmp + t * BITNET_WG + lid;                                       \
        __global const float* xr = xt + (size_t)t * n_cols;                                       \
        float sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));           \
        for (int i = n8; i < n_cols; ++i) sum += LOAD(w, wd, w0 + i) * xr[i];                     \
        y[(size_t)(t0 + t) * n_out + row0 + r] = sum;                                             \
      }                                                                                           \
    }                                                                                             \
  }

DEFINE_EMBED(f32, LOAD_F32)
DEFINE_EMBED(f16, LOAD_F16)
DEFINE_EMBED(bf16, LOAD_BF16)
DEFINE_EMBED(q8_0, LOAD_Q8_0)
DEFINE_MATMUL(f32, LOAD_F32)
DEFINE_MATMUL(f16, LOAD_F16)
DEFINE_MATMUL(bf16, LOAD_BF16)
DEFINE_MATMUL(q8_0, LOAD_Q8_0)
