// NEON dotprod set, quantized-activation row dots (KernelSet::quant_dot): the kernels of
// kernels_neon_qdot_impl.h compiled once more, with SDOT (vdotq_s32) as their 16-byte int8 dot
// instead of vmull_s8 + vpadalq_s16, into neon_dotprod::quant_dot. Compiled with
// -march=armv8.2-a+dotprod: only intrinsics and that file's anonymous-namespace helpers (see
// CMakeLists.txt); neon-dotprod and neon-i8mm call it only after the CPU was checked.
#define BITNET_NEON_QDOT_SDOT 1
#include "backends/cpu/kernels_neon_qdot_impl.h"
