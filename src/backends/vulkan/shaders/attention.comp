#version 450
// Causal GQA attention of one query head of one token (one workgroup per (token, head)) over
// its sequence's cached positions [0, pos[t]]: softmax(q k^T * kq_scale) v, in three passes over the
// keys (max; sum of exp; normalised weights times V), recomputing scores instead of storing
// them so any context length fits. Each score is one invocation's dot product with the CPU
// reference's 8-accumulator order; the output sums positions in order, one thread per dim.
// Caches: one layer, rows of n_embd_kv floats; head h reads kv head h / (n_head / n_head_kv).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k_cache[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float v_cache[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { float dst[]; };
// [position of each token][start of its block table], then the tables: position j of token
// t's sequence is cache row tables[start + j / block] * block + j % block.
layout(std430, set = 0, binding = 4) readonly buffer KvMap { int kv_map[]; };
layout(push_constant) uniform Params {
  uint n_head;
  uint n_head_kv;
  uint head_dim;   // <= MAX_HEAD_DIM
  uint n_embd_kv;
  uint n_tokens;
  uint block;
  float kq_scale;
} p;

const uint WG = 64u;
const uint MAX_HEAD_DIM = 256u;
shared float qs[MAX_HEAD_DIM];
shared float red[WG];
shared float probs[WG];

uint table_base;  // where this token's block table starts in kv_map

uint cache_row(uint j) { return uint(kv_map[table_base + j / p.block]) * p.block + j % p.block; }

float score(uint j, uint kv_off) {
  uint kb = cache_row(j) * p.n_embd_kv + kv_off;
  precise float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  uint i = 0u;
  for (; i + 8u <= p.head_dim; i += 8u) {
    for (uint l = 0u; l < 8u; ++l) acc[l] += qs[i + l] * k_cache[kb + i + l];
  }
  precise float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < p.head_dim; ++i) sum += qs[i] * k_cache[kb + i];
  precise float s = sum * p.kq_scale;
  return s;
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint h = gl_WorkGroupID.x % p.n_head;
  uint t = gl_WorkGroupID.x / p.n_head;
  uint n_pos = uint(kv_map[t]) + 1u;
  table_base = 2u * p.n_tokens + uint(kv_map[p.n_tokens + t]);
  uint kv_off = (h / (p.n_head / p.n_head_kv)) * p.head_dim;
  uint q_base = (t * p.n_head + h) * p.head_dim;
  for (uint d = tid; d < p.head_dim; d += WG) qs[d] = q[q_base + d];
  barrier();

  float m = -1.0 / 0.0;
  for (uint j = tid; j < n_pos; j += WG) m = max(m, score(j, kv_off));
  red[tid] = m;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] = max(red[tid], red[tid + s]);
    barrier();
  }
  m = red[0];
  barrier();

  precise float sum = 0.0;
  for (uint j = tid; j < n_pos; j += WG) sum += exp(score(j, kv_off) - m);
  red[tid] = sum;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] = red[tid] + red[tid + s];
    barrier();
  }
  float inv_sum = 1.0 / red[0];

  // Output dims d = tid, tid + WG, ...: at most MAX_HEAD_DIM / WG per thread.
  precise float out_acc[MAX_HEAD_DIM / WG] = float[MAX_HEAD_DIM / WG](0.0, 0.0, 0.0, 0.0);
  for (uint j0 = 0u; j0 < n_pos; j0 += WG) {
    barrier();
    uint j = j0 + tid;
    if (j < n_pos) probs[tid] = exp(score(j, kv_off) - m) * inv_sum;
    barrier();
    uint n = min(WG, n_pos - j0);
    for (uint c = 0u; c < MAX_HEAD_DIM / WG; ++c) {
      uint d = tid + c * WG;
      if (d >= p.head_dim) break;
      for (uint jj = 0u; jj < n; ++jj) out_acc[c] += probs[jj] * v_cache[cache_row(j0 + jj) * p.n_embd_kv + kv_off + d];
    }
  }
  for (uint c = 0u; c < MAX_HEAD_DIM / WG; ++c) {
    uint d = tid + c * WG;
    if (d < p.head_dim) dst[q_base + d] = out_acc[c];
  }
}
