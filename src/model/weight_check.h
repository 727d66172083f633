// Sanity checks of weight statistics, for strict mode: a norm vector full of zeros, NaN or
// 1e30 means a broken conversion, and the model would still "run" and print garbage.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

namespace bitnet {

// One message per suspicious tensor: non-finite values in any 1-D weight (norms, .scale
// tensors), or a norm whose root-mean-square lies outside [1e-3, 1e3].
std::vector<std::string> find_suspicious_weights(const Network& model);

}  // namespace bitnet
