// Element k of row r of a float-path weight chunk of n_rows rows. Weights are stored
// word-interleaved ("column-major in 32-bit words"): word j of row r is wdata[j * n_rows + r],
// so invocations handling neighbouring rows load neighbouring words. Needs, declared before the
// include: spec constant TYPE, `uint wdata[]` (F32 bits; F16/BF16: elements 2j, 2j+1 in word j;
// Q8_0: elements 4j..4j+3 as int8) and `float wscale[]` (Q8_0: scale of (r, k / 32) at
// (k / 32) * n_rows + r).
float weight_at(uint r, uint k, uint n_rows) {
  if (TYPE == kTypeF32) return uintBitsToFloat(wdata[k * n_rows + r]);
  if (TYPE == kTypeF16) {
    vec2 h = unpackHalf2x16(wdata[(k >> 1) * n_rows + r]);
    return (k & 1u) == 0u ? h.x : h.y;
  }
  if (TYPE == kTypeBF16) {
    uint word = wdata[(k >> 1) * n_rows + r];
    uint h = (k & 1u) == 0u ? (word & 0xffffu) : (word >> 16);
    return uintBitsToFloat(h << 16);
  }
  // Q8_0: float(q) * d, one rounding, as quant::dequantize.
  int q = bitfieldExtract(int(wdata[(k >> 2) * n_rows + r]), int(8u * (k & 3u)), 8);
  return float(q) * wscale[(k >> 5) * n_rows + r];
}
