// Part of each logits row (Backend::compute_top): the CUDA backend's radix select
// (src/backends/cuda/top_math.h has the algorithm and its host twin), one work-group of
// BITNET_WG per row. args is a hal::TopPlan's words: k[n_rows], out_begin[n_rows + 1],
// also_begin[n_rows + 1], also[]; out holds (id, logit bits) pairs.

// Copies of each histogram bin, by work-item: items that meet keys of one digit (logits share
// their top bits) add to different words.
#define TOP_COPIES 8

// A key that orders as the logits rank: larger logit, larger key; -0 as +0; NaN lowest (0).
inline uint top_key(float v) {
  if (isnan(v)) return 0u;
  uint u = as_uint(v);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

__kernel void top_k_rows(__global const float* x, const int n_cols, const int n_rows, __global const int* args,
                         __global int* out) {
  __local uint hist[256 * TOP_COPIES];
  __local uint s_digit, s_need, s_count, s_slot;
  const int r = get_group_id(0);
  const int lid = get_local_id(0);
  const int wg = get_local_size(0);
  __global const float* row = x + (long)r * n_cols;
  const int k = args[r];
  __global int* dst = out + 2 * args[n_rows + r];
  const uint copy = (uint)lid % TOP_COPIES;
  if (k > 0) {  // the same for the whole group
    uint prefix = 0, mask = 0;
    if (lid == 0) s_need = (uint)k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = lid; i < 256 * TOP_COPIES; i += wg) hist[i] = 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int i = lid; i < n_cols; i += wg) {
        const uint key = top_key(row[i]);
        if ((key & mask) == prefix) atomic_inc(&hist[((key >> shift) & 255u) * TOP_COPIES + copy]);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int b = lid; b < 256; b += wg) {
        uint sum = 0;
        for (int c = 0; c < TOP_COPIES; ++c) sum += hist[b * TOP_COPIES + c];
        hist[b * TOP_COPIES] = sum;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid == 0) {
        // The digit of the need-th largest key among those matching the prefix so far.
        uint need = s_need, above = 0, digit = 0, count = 0;
        for (int b = 255; b >= 0; --b) {
          const uint h = hist[b * TOP_COPIES];
          if (above + h >= need) {
            need -= above;
            count = h;
            digit = (uint)b;
            break;
          }
          above += h;
        }
        s_digit = digit;
        s_need = need;
        s_count = count;
        s_slot = 0;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      prefix |= s_digit << shift;
      mask |= 0xffu << shift;
    }
    // Every entry above the k-th key, and those at it when all of them are taken.
    const uint need = s_need;
    const bool all_at = need == s_count;
    for (int i = lid; i < n_cols; i += wg) {
      const float v = row[i];
      const uint key = top_key(v);
      if (key > prefix || (all_at && key == prefix)) {
        const uint slot = atomic_inc(&s_slot);
        dst[2 * slot] = i;
        dst[2 * slot + 1] = as_int(v);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!all_at && lid == 0) {
      // A tie at the boundary: the first `need` of the entries at the k-th key, by index.
      uint slot = s_slot, taken = 0;
      for (int i = 0; i < n_cols && taken < need; ++i) {
        if (top_key(row[i]) == prefix) {
          dst[2 * slot] = i;
          dst[2 * slot + 1] = as_int(row[i]);
          ++slot;
          ++taken;
        }
      }
    }
  }
  const int b0 = args[2 * n_rows + 1 + r];
  const int n_also = args[2 * n_rows + 2 + r] - b0;
  __global const int* also = args + 3 * n_rows + 2;
  for (int j = lid; j < n_also; j += wg) {
    const int id = also[b0 + j];
    dst[2 * (k + j)] = id;
    dst[2 * (k + j) + 1] = as_int(row[id]);
  }
}
