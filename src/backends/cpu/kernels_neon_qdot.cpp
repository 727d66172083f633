// NEON set, quantized-activation row dots (KernelSet::quant_dot): the kernels of
// kernels_neon_qdot_impl.h on baseline Advanced SIMD, as neon::quant_dot.
#include "backends/cpu/kernels_neon_qdot_impl.h"
