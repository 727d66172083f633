// The public ModelSummary of a loaded model (shared by Engine and read_model_file_info).
#pragma once

#include "bitnet/engine.h"
#include "model/model.h"

namespace bitnet {

ModelSummary summarize_model(const Network& model);

}  // namespace bitnet
