// Synthetic models: a GGUF with random ternary weights of any shape (including the real
// BitNet b1.58 2B-4T shape), for tests and benchmarks. Not a trained model. The float
// architectures (llama, qwen2, qwen3) get the same ternary-valued linears stored as floats,
// plus random biases (qwen2) and q/k norm gains (qwen3), so that other engines can run the
// same file (tests/e2e/qwen_golden_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitnet/status.h"

namespace bitnet {

struct SynthShape {
  std::string architecture = "bitnet-b1.58";
  int64_t n_vocab = 512;
  int64_t n_embd = 256;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_ff = 768;
  int64_t n_embd_head = 0;  // written as attention.key_length when set (qwen3); 0 = n_embd / n_head
  int64_t n_ctx = 2048;
  float rope_freq_base = 500000.0f;
};

struct SynthOptions {
  std::string output_path;
  SynthShape shape;
  std::string weight_type = "i2_s";  // i2_s | tq2_0 | tq1_0 | f16 | f32 (the 7 linears; float
                                     // architectures take f16 or f32)
  std::string vocab_from;            // copy tokenizer.* from this GGUF; empty = synthetic vocab
  uint64_t seed = 1;
};

// Preset names: "tiny", "small", "2b4t".
std::vector<std::string> synth_preset_names();
Result<SynthShape> synth_preset(const std::string& name);

Status synthesize_model(const SynthOptions& options);

}  // namespace bitnet
