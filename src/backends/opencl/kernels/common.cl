// Prepended to every kernel file. Build options define:
//   BITNET_WG         work-group size of the reducing kernels (a power of two)
//   BITNET_HAS_FP64   the device has cl_khr_fp64: reductions that the CPU reference does in
//                     double (rms_norm, act_quant's 127/max) are done in double too
//   BITNET_INT8_DOT   the device has cl_khr_integer_dot_product (4x8-bit dot products)
// The CPU reference is compiled without FMA contraction: do the same so that a*b+c rounds twice.
#pragma OPENCL FP_CONTRACT OFF
#ifdef BITNET_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

// exp of a float as glibc's expf computes it (Arm optimized-routines: a 32-entry table of
// 2^(i/32) and a cubic in double), so that softmax and SiLU match the CPU reference bit for bit
// where the device has fp64; a one-ulp difference before quantize_act can flip an int8
// activation downstream. Checked against glibc 2.36's expf on 3 million arguments. Without
// fp64: the device's float exp (a few ulp).
#ifdef BITNET_HAS_FP64
__constant ulong kExp2fTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

inline float exp_ref(float x) {
  const uint ux = as_uint(x);
  const uint abstop = (ux >> 20) & 0x7ff;
  if (abstop >= 0x42b) {  // |x| >= 88
    if (ux == 0xff800000u) return 0.0f;        // -inf
    if (abstop >= 0x7f8) return x + x;         // inf, nan
    if (x > 0x1.62e42ep6f) return INFINITY;    // overflow
    if (x < -0x1.9fe368p6f) return 0.0f;       // underflow
  }
  // x * 32 / ln2 = k + r, exp(x) = 2^(k/32) * 2^(r/32).
  const double z = (0x1.71547652b82fep+0 * 32) * (double)x;
  double kd = z + 0x1.8p+52;
  const ulong ki = as_ulong(kd);
  kd -= 0x1.8p+52;
  const double r = z - kd;
  const double s = as_double(kExp2fTable[ki % 32] + (ki << 47));
  const double zc = 0x1.c6af84b912394p-5 / 32 / 32 / 32 * r + 0x1.ebfce50fac4f3p-3 / 32 / 32;
  const double r2 = r * r;
  double y = 0x1.62e42ff0c52d6p-1 / 32 * r + 1;
  y = zc * r2 + y;
  return (float)(y * s);
}
#else
inline float exp_ref(float x) { return exp(x); }
#endif

#define BITNET_KERNEL __kernel __attribute__((reqd_work_group_size(BITNET_WG, 1, 1)))

// Tree reductions over the work-group in local memory; every work-item gets the result.
// On a device with subgroups, the last 32/64 steps would be sub_group_reduce_* (see README).
// One definition per (name, type, combine); OpenCL C has no templates, hence the macro.
#define BITNET_WG_REDUCE(NAME, T, COMBINE)                        \
  inline T NAME(__local T* tmp, T v) {                            \
    const int lid = get_local_id(0);                              \
    tmp[lid] = v;                                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                 \
    for (int s = BITNET_WG / 2; s > 0; s >>= 1) {                 \
      if (lid < s) tmp[lid] = COMBINE(tmp[lid], tmp[lid + s]);    \
      barrier(CLK_LOCAL_MEM_FENCE);                               \
    }                                                             \
    const T r = tmp[0];                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                 \
    return r;                                                     \
  }
#define BITNET_ADD(a, b) ((a) + (b))

BITNET_WG_REDUCE(wg_reduce_max_f32, float, fmax)
BITNET_WG_REDUCE(wg_reduce_sum_f32, float, BITNET_ADD)
BITNET_WG_REDUCE(wg_reduce_sum_acc, acc_t, BITNET_ADD)
BITNET_WG_REDUCE(wg_reduce_sum_i32, int, BITNET_ADD)

// The CPU reference's dot product (kernels_scalar.cpp dot_f32): 8 interleaved accumulators,
// summed pairwise, then the tail. Same order, so attention scores match it bit for bit.
inline float dot_f32_ref(__global const float* a, __global const float* b, int n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}
