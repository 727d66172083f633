// One work-item per element. n: elements. The CPU twins are in kernels_scalar.cpp.

__kernel void add_f32(__global float* dst, __global const float* a, __global const float* b, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) dst[i] = a[i] + b[i];
}

__kernel void silu_mul_f32(__global float* dst, __global const float* a, __global const float* b, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) dst[i] = a[i] / (1.0f + exp_ref(-a[i])) * b[i];
}

// relu as std::max(a, 0.0f): a NaN stays NaN.
__kernel void relu2_mul_f32(__global float* dst, __global const float* a, __global const float* b, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) {
    const float r = a[i] < 0.0f ? 0.0f : a[i];
    dst[i] = r * r * b[i];
  }
}

// dst[i] += b[i % n_cols] (a linear's bias, one row added to every row); n: elements.
__kernel void bias_f32(__global float* dst, __global const float* b, ulong n_cols, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) dst[i] = dst[i] + b[i % n_cols];
}

// dst *= w[0] (a {1}-shaped per-linear scale).
__kernel void scale_f32(__global float* dst, __global const float* w, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) dst[i] *= w[0];
}

// dst[i] = src[row0 * n_cols + i] for i < n (n = rows * n_cols of dst).
__kernel void copy_rows_f32(__global float* dst, __global const float* src, ulong src_off, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) dst[i] = src[src_off + i];
}

// Global size (n_embd_kv, n_tokens). Caches of one layer: [n_ctx][n_embd_kv]; rows[t]: the
// cache row of token t's position (the KV map's first part).
__kernel void store_kv_f32(__global float* k_cache, __global float* v_cache, __global const float* k,
                           __global const float* v, int n_embd_kv, __global const int* rows) {
  const int i = get_global_id(0);
  const int t = get_global_id(1);
  if (i >= n_embd_kv) return;
  const size_t src = (size_t)t * n_embd_kv + i;
  const size_t dst = (size_t)rows[t] * n_embd_kv + i;
  k_cache[dst] = k[src];
  v_cache[dst] = v[src];
}
