// Element k of row r of a float-path weight chunk of n_rows rows. Weights are stored
// word-interleaved ("column-major in 32-bit words"): word j of row r is wdata[j * n_rows + r],
// so invocations handling neighbouring rows load neighbouring words. Needs, declared before the
// include: spec constant TYPE, `uint wdata[]` (F32 bits; F16/BF16: elements 2j, 2j+1 in word j;
// Q8_0: elements 4j..4j+3 as int8) and `float wscale[]` (Q8_0: scale of (r, k / 32) at
// (k / 32) * n_rows + r).
// The llama.cpp block formats (Q4_0 .. IQ4_XS) keep the file's bytes: row r is its blocks in
// order, byte o of the row in byte o % 4 of word o / 4 (then word-interleaved as above). Each
// element is dequantized with quant::dequantize's arithmetic (ggml's dequantize_row_*), one
// `precise` float operation at a time, so it equals the CPU's value bit for bit. Every block
// size is even, so an fp16 field is one half of a word.

// Byte o of row r.
uint wbyte(uint r, uint o, uint n_rows) { return (wdata[(o >> 2) * n_rows + r] >> (8u * (o & 3u))) & 0xffu; }
// The fp16 at (even) byte o of row r, widened.
float whalf(uint r, uint o, uint n_rows) {
  vec2 h = unpackHalf2x16(wdata[(o >> 2) * n_rows + r]);
  return (o & 2u) == 0u ? h.x : h.y;
}
// Nibble j (0..31) of 16 bytes at o: j < 16 the low nibble of byte j, else the high one of j - 16.
uint wnibble(uint r, uint o, uint j, uint n_rows) {
  uint b = wbyte(r, o + (j & 15u), n_rows);
  return j < 16u ? (b & 15u) : (b >> 4);
}
// Q2_K/Q3_K 2-bit code of element e from qs[64] at byte o.
uint wlow2(uint r, uint o, uint e, uint n_rows) {
  return (wbyte(r, o + 32u * (e >> 7) + (e & 31u), n_rows) >> (2u * ((e & 127u) >> 5))) & 3u;
}
// Q4_K/Q5_K 6-bit scale (x) and min (y) of sub-block s from the 12 scale bytes at o.
uvec2 wscale_min_k4(uint r, uint o, uint s, uint n_rows) {
  if (s < 4u) return uvec2(wbyte(r, o + s, n_rows) & 63u, wbyte(r, o + s + 4u, n_rows) & 63u);
  uint hi = wbyte(r, o + s + 4u, n_rows);
  return uvec2((hi & 15u) | ((wbyte(r, o + s - 4u, n_rows) >> 6) << 4), (hi >> 4) | ((wbyte(r, o + s, n_rows) >> 6) << 4));
}
const int kIq4NlValues[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

float block_weight_at(uint r, uint k, uint n_rows) {
  if (TYPE == kTypeQ4_0) {  // 18 bytes: d, qs[16]; (q - 8) * d
    uint o = (k >> 5) * 18u;
    precise float v = float(int(wnibble(r, o + 2u, k & 31u, n_rows)) - 8) * whalf(r, o, n_rows);
    return v;
  }
  if (TYPE == kTypeQ4_1) {  // 20 bytes: d, m, qs[16]; q * d + m
    uint o = (k >> 5) * 20u;
    precise float v = float(wnibble(r, o + 4u, k & 31u, n_rows)) * whalf(r, o, n_rows) + whalf(r, o + 2u, n_rows);
    return v;
  }
  if (TYPE == kTypeQ5_0 || TYPE == kTypeQ5_1) {  // 22 bytes: d, qh[4], qs[16] / 24: d, m, qh[4], qs[16]
    bool q5_1 = TYPE == kTypeQ5_1;
    uint o = (k >> 5) * (q5_1 ? 24u : 22u);
    uint j = k & 31u;
    uint qh = q5_1 ? 4u : 2u;
    uint q = wnibble(r, o + qh + 4u, j, n_rows) | (((wbyte(r, o + qh + (j >> 3), n_rows) >> (j & 7u)) & 1u) << 4);
    if (!q5_1) {
      precise float v = float(int(q) - 16) * whalf(r, o, n_rows);
      return v;
    }
    precise float v = float(q) * whalf(r, o, n_rows) + whalf(r, o + 2u, n_rows);
    return v;
  }
  uint e = k & 255u;
  if (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K) {
    // 144 bytes: d, dmin, scales[12], qs[128] / 176: d, dmin, scales[12], qh[32], qs[128].
    // (d * sc) * q - dmin * mn; element e = 64c + 32k + l is nibble k of qs[32c + l].
    bool q5 = TYPE == kTypeQ5_K;
    uint o = (k >> 8) * (q5 ? 176u : 144u);
    uvec2 sm = wscale_min_k4(r, o + 4u, e >> 5, n_rows);
    uint b = wbyte(r, o + (q5 ? 48u : 16u) + 32u * (e >> 6) + (e & 31u), n_rows);
    uint q = ((e >> 5) & 1u) == 0u ? (b & 15u) : (b >> 4);
    if (q5) q += 16u * ((wbyte(r, o + 16u + (e & 31u), n_rows) >> (e >> 5)) & 1u);
    precise float d = whalf(r, o, n_rows) * float(sm.x);
    precise float m = whalf(r, o + 2u, n_rows) * float(sm.y);
    precise float v = d * float(q) - m;
    return v;
  }
  if (TYPE == kTypeQ6_K) {  // 210 bytes: ql[128], qh[64], int8 scales[16], d; (d * sc) * (q - 32)
    uint o = (k >> 8) * 210u;
    uint h = e >> 7, kk = (e & 127u) >> 5, l = e & 31u;
    uint lo = wbyte(r, o + 64u * h + 32u * (kk & 1u) + l, n_rows);
    uint q = (kk < 2u ? (lo & 15u) : (lo >> 4)) | (((wbyte(r, o + 128u + 32u * h + l, n_rows) >> (2u * kk)) & 3u) << 4);
    int sc = bitfieldExtract(int(wbyte(r, o + 192u + (e >> 4), n_rows)), 0, 8);
    precise float v = whalf(r, o + 208u, n_rows) * float(sc) * float(int(q) - 32);
    return v;
  }
  if (TYPE == kTypeQ2_K) {  // 84 bytes: scales[16], qs[64], d, dmin; (d * sc) * q - dmin * mn
    uint o = (k >> 8) * 84u;
    uint s = wbyte(r, o + (e >> 4), n_rows);
    precise float dl = whalf(r, o + 80u, n_rows) * float(s & 15u);
    precise float ml = whalf(r, o + 82u, n_rows) * float(s >> 4);
    precise float v = dl * float(wlow2(r, o + 16u, e, n_rows)) - ml;
    return v;
  }
  if (TYPE == kTypeQ3_K) {  // 110 bytes: hmask[32], qs[64], scales[12], d
    uint o = (k >> 8) * 110u;
    uint s = e >> 4;
    uint lo = s < 8u ? (wbyte(r, o + 96u + s, n_rows) & 15u) : (wbyte(r, o + 88u + s, n_rows) >> 4);
    uint sc = lo | (((wbyte(r, o + 104u + (s & 3u), n_rows) >> (2u * (s >> 2))) & 3u) << 4);
    precise float dl = whalf(r, o + 108u, n_rows) * float(int(sc) - 32);
    uint high = (wbyte(r, o + (e & 31u), n_rows) >> (e >> 5)) & 1u;
    precise float v = dl * float(int(wlow2(r, o + 32u, e, n_rows)) - (high == 1u ? 0 : 4));
    return v;
  }
  if (TYPE == kTypeIQ4_NL) {  // 18 bytes: d, qs[16]; d * table[q]
    uint o = (k >> 5) * 18u;
    precise float v = whalf(r, o, n_rows) * float(kIq4NlValues[wnibble(r, o + 2u, k & 31u, n_rows)]);
    return v;
  }
  // IQ4_XS: 136 bytes: d, scales_h (uint16), scales_l[4], qs[128]; (d * (ls - 32)) * table[q]
  uint o = (k >> 8) * 136u;
  uint s = e >> 5;
  uint scales_h = wbyte(r, o + 2u, n_rows) | (wbyte(r, o + 3u, n_rows) << 8);
  uint ls = ((wbyte(r, o + 4u + (s >> 1), n_rows) >> (4u * (s & 1u))) & 15u) | (((scales_h >> (2u * s)) & 3u) << 4);
  precise float dl = whalf(r, o, n_rows) * float(int(ls) - 32);
  precise float v = dl * float(kIq4NlValues[wnibble(r, o + 8u + 16u * s, e & 31u, n_rows)]);
  return v;
}

float weight_at(uint r, uint k, uint n_rows) {
  if (TYPE >= kTypeQ4_0) return block_weight_at(r, k, n_rows);
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

// 8 bytes from (even) byte o of row r, little-endian: bytes 0-3 in .x, 4-7 in .y.
uvec2 wbytes8(uint r, uint o, uint n_rows) {
  uint i = (o >> 2) * n_rows + r;
  uint a = wdata[i];
  uint b = wdata[i + n_rows];
  if ((o & 3u) == 0u) return uvec2(a, b);
  uint c = wdata[i + 2u * n_rows];
  return uvec2((a >> 16) | (b << 16), (b >> 16) | (c << 16));
}
uint byte_of(uvec2 v, uint l) { return ((l < 4u ? v.x : v.y) >> (8u * (l & 3u))) & 0xffu; }

// Elements k .. k+7 of row r (k a multiple of 8), the same values as weight_at: a block
// format's scales are read once for the 8 (they share a block and a sub-block) and its
// codes come from runs of 8 consecutive bytes.
void weight8_at(uint r, uint k, uint n_rows, out float w8[8]) {
  if (TYPE < kTypeQ4_0) {
    for (uint l = 0u; l < 8u; ++l) w8[l] = weight_at(r, k + l, n_rows);
    return;
  }
  uint j0 = k & 31u;   // first element within a 32-element block or sub-block
  uint e0 = k & 255u;  // first element within a 256-element super-block
  if (TYPE == kTypeQ4_0 || TYPE == kTypeIQ4_NL) {
    uint o = (k >> 5) * 18u;
    float d = whalf(r, o, n_rows);
    uvec2 v = wbytes8(r, o + 2u + (j0 & 15u), n_rows);
    for (uint l = 0u; l < 8u; ++l) {
      uint b = byte_of(v, l);
      uint q = j0 < 16u ? (b & 15u) : (b >> 4);
      if (TYPE == kTypeQ4_0) {
        precise float x = float(int(q) - 8) * d;
        w8[l] = x;
      } else {
        precise float x = d * float(kIq4NlValues[q]);
        w8[l] = x;
      }
    }
    return;
  }
  if (TYPE == kTypeQ4_1) {
    uint o = (k >> 5) * 20u;
    float d = whalf(r, o, n_rows);
    float m = whalf(r, o + 2u, n_rows);
    uvec2 v = wbytes8(r, o + 4u + (j0 & 15u), n_rows);
    for (uint l = 0u; l < 8u; ++l) {
      uint b = byte_of(v, l);
      precise float x = float(j0 < 16u ? (b & 15u) : (b >> 4)) * d + m;
      w8[l] = x;
    }
    return;
  }
  if (TYPE == kTypeQ5_0 || TYPE == kTypeQ5_1) {
    bool q5_1 = TYPE == kTypeQ5_1;
    uint o = (k >> 5) * (q5_1 ? 24u : 22u);
    uint qh = q5_1 ? 4u : 2u;
    float d = whalf(r, o, n_rows);
    float m = q5_1 ? whalf(r, o + 2u, n_rows) : 0.0;
    uint hb = wbyte(r, o + qh + (j0 >> 3), n_rows);  // bits of elements j0 .. j0+7
    uvec2 v = wbytes8(r, o + qh + 4u + (j0 & 15u), n_rows);
    for (uint l = 0u; l < 8u; ++l) {
      uint b = byte_of(v, l);
      uint q = (j0 < 16u ? (b & 15u) : (b >> 4)) | (((hb >> l) & 1u) << 4);
      if (q5_1) {
        precise float x = float(q) * d + m;
        w8[l] = x;
      } else {
        precise float x = float(int(q) - 16) * d;
        w8[l] = x;
      }
    }
    return;
  }
  if (TYPE == kTypeQ4_K || TYPE == kTypeQ5_K) {
    bool q5 = TYPE == kTypeQ5_K;
    uint o = (k >> 8) * (q5 ? 176u : 144u);
    uint sub = e0 >> 5;
    uvec2 sm = wscale_min_k4(r, o + 4u, sub, n_rows);
    precise float d = whalf(r, o, n_rows) * float(sm.x);
    precise float m = whalf(r, o + 2u, n_rows) * float(sm.y);
    uvec2 v = wbytes8(r, o + (q5 ? 48u : 16u) + 32u * (e0 >> 6) + j0, n_rows);
    uvec2 h = q5 ? wbytes8(r, o + 16u + j0, n_rows) : uvec2(0u);
    for (uint l = 0u; l < 8u; ++l) {
      uint b = byte_of(v, l);
      uint q = (sub & 1u) == 0u ? (b & 15u) : (b >> 4);
      if (q5) q += 16u * ((byte_of(h, l) >> sub) & 1u);
      precise float x = d * float(q) - m;
      w8[l] = x;
    }
    return;
  }
  if (TYPE == kTypeQ6_K) {
    uint o = (k >> 8) * 210u;
    uint hh = e0 >> 7, kk = (e0 & 127u) >> 5;
    int sc = bitfieldExtract(int(wbyte(r, o + 192u + (e0 >> 4), n_rows)), 0, 8);
    precise float ds = whalf(r, o + 208u, n_rows) * float(sc);
    uvec2 lo = wbytes8(r, o + 64u * hh + 32u * (kk & 1u) + j0, n_rows);
    uvec2 hi = wbytes8(r, o + 128u + 32u * hh + j0, n_rows);
    for (uint l = 0u; l < 8u; ++l) {
      uint b = byte_of(lo, l);
      uint q = (kk < 2u ? (b & 15u) : (b >> 4)) | (((byte_of(hi, l) >> (2u * kk)) & 3u) << 4);
      precise float x = ds * float(int(q) - 32);
      w8[l] = x;
    }
    return;
  }
  if (TYPE == kTypeQ2_K) {
    uint o = (k >> 8) * 84u;
    uint s = wbyte(r, o + (e0 >> 4), n_rows);
    precise float dl = whalf(r, o + 80u, n_rows) * float(s & 15u);
    precise float ml = whalf(r, o + 82u, n_rows) * float(s >> 4);
    uvec2 v = wbytes8(r, o + 16u + 32u * (e0 >> 7) + j0, n_rows);
    uint shift = 2u * ((e0 & 127u) >> 5);
    for (uint l = 0u; l < 8u; ++l) {
      precise float x = dl * float((byte_of(v, l) >> shift) & 3u) - ml;
      w8[l] = x;
    }
    return;
  }
  if (TYPE == kTypeQ3_K) {
    uint o = (k >> 8) * 110u;
    uint s = e0 >> 4;
    uint lo = s < 8u ? (wbyte(r, o + 96u + s, n_rows) & 15u) : (wbyte(r, o + 88u + s, n_rows) >> 4);
    uint sc = lo | (((wbyte(r, o + 104u + (s & 3u), n_rows) >> (2u * (s >> 2))) & 3u) << 4);
    precise float dl = whalf(r, o + 108u, n_rows) * float(int(sc) - 32);
    uvec2 hm = wbytes8(r, o + j0, n_rows);
    uvec2 v = wbytes8(r, o + 32u + 32u * (e0 >> 7) + j0, n_rows);
    uint shift = 2u * ((e0 & 127u) >> 5);
    for (uint l = 0u; l < 8u; ++l) {
      uint high = (byte_of(hm, l) >> (e0 >> 5)) & 1u;
      precise float x = dl * float(int((byte_of(v, l) >> shift) & 3u) - (high == 1u ? 0 : 4));
      w8[l] = x;
    }
    return;
  }
  // IQ4_XS
  uint o = (k >> 8) * 136u;
  uint s = e0 >> 5;
  uint scales_h = wbyte(r, o + 2u, n_rows) | (wbyte(r, o + 3u, n_rows) << 8);
  uint ls = ((wbyte(r, o + 4u + (s >> 1), n_rows) >> (4u * (s & 1u))) & 15u) | (((scales_h >> (2u * s)) & 3u) << 4);
  precise float dl = whalf(r, o, n_rows) * float(int(ls) - 32);
  uvec2 v = wbytes8(r, o + 8u + 16u * s + (j0 & 15u), n_rows);
  for (uint l = 0u; l < 8u; ++l) {
    uint b = byte_of(v, l);
    precise float x = dl * float(kIq4NlValues[j0 < 16u ? (b & 15u) : (b >> 4)]);
    w8[l] = x;
  }
}
