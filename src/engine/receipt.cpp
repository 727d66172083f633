// The JSON receipt of a run: what was asked for, what was found, what really ran.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "bitnet/engine.h"
#include "core/sha256.h"
#include "engine/engine_impl.h"

namespace bitnet {

namespace {

constexpr int kReceiptSchemaVersion = 1;

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double per_second(int64_t n, double seconds) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; }

}  // namespace

Result<std::string> Engine::receipt_json(const GenerateStats& stats) const {
  const EngineCore& m = core();
  BITNET_RETURN_IF_ERROR(m.usable());
  using nlohmann::json;
  json fallbacks = json::array();
  for (const Fallback& f : m.fallbacks) fallbacks.push_back({{"from", f.from}, {"to", f.to}, {"reason", f.reason}});
  const hal::BackendStats bs = m.backend->stats();
  const ModelSummary& s = m.summary;
  json receipt = {
      {"schema_version", kReceiptSchemaVersion},
      {"timestamp", utc_timestamp()},
      {"engine", {{"name", "bitnet"}, {"version", BITNET_VERSION}}},
      {"request",
       {{"device", m.options.device},
        {"gpu_backend", m.options.gpu_backend},
        {"gpu_device", m.options.gpu_device},
        {"cpu_isa", m.options.cpu_isa},
        {"cache_type", m.options.cache_type},
        {"strict", m.options.strict}}},
      {"detected", m.plan.detected},
      {"selected", m.device().id},
      {"backend",
       {{"id", m.device().id},
        {"backend", m.device().backend},
        {"device", m.backend->info().device},
        {"threads", m.backend->info().n_threads}}},
      {"compute_path", "real"},
      {"kernels", m.backend->kernels_used()},
      {"fallbacks", fallbacks},
      {"warnings", m.warnings},
      {"model",
       {{"path", m.options.model_path},
        {"name", s.name},
        {"architecture", s.architecture},
        {"file_bytes", m.file.bytes().size()},
        {"file_sha256", sha256_hex(m.file.bytes())},
        {"weight_types", s.weight_types},
        {"n_params", s.n_params}}},
      {"tokens", {{"prompt", stats.n_prompt}, {"generated", stats.n_generated}, {"n_ctx", m.n_ctx}}},
      {"timings",
       {{"prompt_seconds", stats.prompt_seconds},
        {"generate_seconds", stats.generate_seconds},
        {"prompt_tokens_per_second", per_second(stats.n_prompt, stats.prompt_seconds)},
        {"generate_tokens_per_second", per_second(stats.n_generated, stats.generate_seconds)}}},
      {"stop_reason", stats.stop_reason},
      {"stats",
       {{"fallbacks", m.fallbacks.size()},
        {"weight_bytes", bs.weight_bytes},
        {"kv_bytes", bs.kv_bytes},
        {"kv_type", hal::kv_type_name(bs.kv_type)},
        {"pool_allocations", bs.pool_allocations},
        {"pool_reuses", bs.pool_reuses},
        {"pool_peak_bytes", bs.pool_peak_bytes}}},
  };
  return receipt.dump(2);
}

}  // namespace bitnet
