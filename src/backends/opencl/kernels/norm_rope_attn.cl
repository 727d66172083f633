// rms_norm, rope and attention.

// dst = x / sqrt(mean(x^2) + eps) * g; one work-group per row. The sum of squares is taken
// in double where the device has it (as the CPU reference and ggml), else in float.
// dst may be x (in place): each work-item rewrites only the elements it read.
BITNET_KERNEL void rms_norm_f32(__global float* dst, __global const float* x, __global const float* g,
                                int n_cols, float eps) {
  __local acc_t tmp[BITNET_WG];
  const int r = get_group_id(0);
  const int lid = get_local_id(0);
  __global const float* xr = x + (size_t)r * n_cols;
  __global float* yr = dst + (size_t)r * n_cols;
  acc_t sum = 0;
  for (int k = lid; k < n_cols; k += BITNET_WG) sum += (acc_t)xr[k] * xr[k];
  sum = wg_reduce_sum_acc(tmp, sum);
  const float scale = 1.0f / sqrt((float)(sum / (acc_t)n_cols) + eps);
  for (int k = lid; k < n_cols; k += BITNET_WG) yr[k] = xr[k] * scale * g[k];
}

// Rotates pairs in place. Global size (n_rot / 2, n_head, n_tokens); x: [n_tokens][n_cols].
// table: float2 (cos, sin)[n_tokens][n_rot / 2] of theta_i = pos * freq_scale * theta_scale^i
// (llama.cpp's float recurrence), from the host (cl_backend.cpp upload_rope_table).
// NORM rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2]).
__kernel void rope_f32(__global float* x, __global const float2* table, int n_cols, int head_dim, int n_rot,
                       int neox) {
  const int i = get_global_id(0);
  const int h = get_global_id(1);
  const int t = get_global_id(2);
  const float2 cs = table[(size_t)t * (n_rot / 2) + i];
  __global float* v = x + (size_t)t * n_cols + (size_t)h * head_dim;
  const int a = neox ? i : 2 * i;
  const int b = neox ? i + n_rot / 2 : 2 * i + 1;
  const float x0 = v[a];
  const float x1 = v[b];
  v[a] = x0 * cs.x - x1 * cs.y;
  v[b] = x0 * cs.y + x1 * cs.x;
}

// Causal attention with grouped KV heads: query head h of token t (position pos[t]) reads
// kv head h / group over its sequence's cached positions 0 .. pos[t]. One work-group per
// (head, token): global (n_head * BITNET_WG, n_tokens). scores: scratch [n_tokens][n_head][stride].
// q, out: [n_tokens][n_head * head_dim]; caches of one layer: [n_ctx][n_embd_kv]. kv_map:
// [rows][pos][table start] of n_tokens each, then the block tables; position j of token t's
// sequence is row tables[start + j / block] * block + j % block.
// Three passes as the CPU reference: scores and their max; exp and their sum; p . V with the
// positions summed in order for each output dimension (work-items split the dimensions).
BITNET_KERNEL void attention_f32(__global float* out, __global const float* q, __global const float* k_cache,
                                 __global const float* v_cache, __global float* scores, int n_head,
                                 int head_dim, int group, int n_embd_kv, __global const int* kv_map,
                                 int n_tokens, int block, int stride, float kq_scale) {
  __local float tmp_f[BITNET_WG];
  __local acc_t tmp_a[BITNET_WG];
  const int h = get_group_id(0);
  const int t = get_global_id(1);
  const int lid = get_local_id(0);
  const int n_pos = kv_map[n_tokens + t] + 1;
  __global const int* table = kv_map + 3 * n_tokens + kv_map[2 * n_tokens + t];
  const size_t row = (size_t)t * n_head + h;
  __global const float* qh = q + row * head_dim;
  __global float* sc = scores + row * stride;
  const int kv_off = (h / group) * head_dim;

  float m = -INFINITY;
  for (int j = lid; j < n_pos; j += BITNET_WG) {
    const size_t r = (size_t)table[j / block] * block + j % block;
    const float d = dot_f32_ref(qh, k_cache + r * n_embd_kv + kv_off, head_dim) * kq_scale;
    sc[j] = d;
    m = fmax(m, d);
  }
  m = wg_reduce_max_f32(tmp_f, m);
  acc_t sum = 0;
  for (int j = lid; j < n_pos; j += BITNET_WG) {
    const float e = exp_ref(sc[j] - m);
    sc[j] = e;
    sum += e;
  }
  sum = wg_reduce_sum_acc(tmp_a, sum);
  barrier(CLK_GLOBAL_MEM_FENCE);  // every work-item's scores are visible to the whole group
  const float inv_sum = (float)((acc_t)1 / sum);
  for (int d = lid; d < head_dim; d += BITNET_WG) {
    float acc = 0.0f;
    for (int j = 0; j < n_pos; ++j) {
      const size_t r = (size_t)table[j / block] * block + j % block;
      acc += sc[j] * inv_sum * v_cache[r * n_embd_kv + kv_off + d];
    }
    out[row * head_dim + d] = acc;
  }
}
