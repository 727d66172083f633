// The public ModelSummary of a loaded model (shared by Engine and read_model_file_info).
#pragma once

#include "bitnet/engine.h"
#include "hal/backend.h"
#include "model/model.h"

namespace bitnet {

// bytes_per_token counts each weight as `backend` stores it (hal::Backend::weight_bytes), the
// file's bytes where the backend does not say or there is no backend (a file not yet loaded).
ModelSummary summarize_model(const Network& model, const hal::Backend* backend = nullptr);

}  // namespace bitnet
