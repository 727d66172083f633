#version 450
// Part of each logits row (Backend::compute_top): the CUDA backend's radix select
// (src/backends/cuda/top_math.h has the algorithm and its host twin), one workgroup per row.
// args is a hal::TopPlan's words: k[n_rows], out_begin[n_rows + 1], also_begin[n_rows + 1],
// also[]; out holds (id, logit bits) pairs.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) readonly buffer Args { int args[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { int entries[]; };
layout(push_constant) uniform Params {
  uint n_cols;
  uint n_rows;
} p;

// Copies of each histogram bin, by invocation: invocations that meet keys of one digit
// (logits share their top bits) add to different words.
const uint kCopies = 8u;
shared uint hist[256u * kCopies];
shared uint s_digit, s_need, s_count, s_slot;

// A key that orders as the logits rank: larger logit, larger key; -0 as +0; NaN lowest (0).
uint top_key(float v) {
  if (isnan(v)) return 0u;
  uint u = floatBitsToUint(v);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

void put(uint slot, uint id, float v) {
  entries[2u * slot] = int(id);
  entries[2u * slot + 1u] = floatBitsToInt(v);
}

void main() {
  const uint r = gl_WorkGroupID.x;
  const uint lid = gl_LocalInvocationID.x;
  const uint wg = gl_WorkGroupSize.x;
  const uint base = r * p.n_cols;
  const uint k = uint(args[r]);
  const uint out0 = uint(args[p.n_rows + r]);
  const uint copy = lid % kCopies;
  if (k > 0u) {  // the same for the whole workgroup
    uint prefix = 0u, mask = 0u;
    if (lid == 0u) s_need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (uint i = lid; i < 256u * kCopies; i += wg) hist[i] = 0u;
      barrier();
      for (uint i = lid; i < p.n_cols; i += wg) {
        const uint key = top_key(src[base + i]);
        if ((key & mask) == prefix) atomicAdd(hist[((key >> shift) & 255u) * kCopies + copy], 1u);
      }
      barrier();
      for (uint b = lid; b < 256u; b += wg) {
        uint sum = 0u;
        for (uint c = 0u; c < kCopies; ++c) sum += hist[b * kCopies + c];
        hist[b * kCopies] = sum;
      }
      barrier();
      if (lid == 0u) {
        // The digit of the need-th largest key among those matching the prefix so far.
        uint need = s_need, above = 0u, digit = 0u, count = 0u;
        for (int b = 255; b >= 0; --b) {
          const uint h = hist[uint(b) * kCopies];
          if (above + h >= need) {
            need -= above;
            count = h;
            digit = uint(b);
            break;
          }
          above += h;
        }
        s_digit = digit;
        s_need = need;
        s_count = count;
        s_slot = 0u;
      }
      barrier();
      prefix |= s_digit << uint(shift);
      mask |= 0xffu << uint(shift);
    }
    // Every entry above the k-th key, and those at it when all of them are taken.
    const uint need = s_need;
    const bool all_at = need == s_count;
    for (uint i = lid; i < p.n_cols; i += wg) {
      const float v = src[base + i];
      const uint key = top_key(v);
      if (key > prefix || (all_at && key == prefix)) put(out0 + atomicAdd(s_slot, 1u), i, v);
    }
    barrier();
    if (!all_at && lid == 0u) {
      // A tie at the boundary: the first `need` of the entries at the k-th key, by index.
      uint slot = s_slot, taken = 0u;
      for (uint i = 0u; i < p.n_cols && taken < need; ++i) {
        if (top_key(src[base + i]) == prefix) {
          put(out0 + slot, i, src[base + i]);
          ++slot;
          ++taken;
        }
      }
    }
  }
  const uint b0 = uint(args[2u * p.n_rows + 1u + r]);
  const uint n_also = uint(args[2u * p.n_rows + 2u + r]) - b0;
  const uint also0 = 3u * p.n_rows + 2u;
  for (uint j = lid; j < n_also; j += wg) {
    const uint id = uint(args[also0 + b0 + j]);
    put(out0 + k + j, id, src[base + id]);
  }
}
