#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "bitnet/devices.h"
#include "commands.h"

namespace bitnet::cli {

namespace {

struct DevicesFlags {
  bool json = false;
};

std::string mib(uint64_t bytes) { return bytes ? fmt::format("{} MiB", bytes >> 20) : "unknown"; }
const char* yes_no(bool b) { return b ? "yes" : "no"; }

nlohmann::json to_json(const DeviceDescription& d) {
  nlohmann::json j = {{"id", d.id}, {"backend", d.backend}, {"index", d.index}, {"name", d.name},
                      {"vendor", d.vendor}, {"driver_version", d.driver_version},
                      {"api_version", d.api_version}, {"memory_bytes", d.memory_bytes},
                      {"max_alloc_bytes", d.max_alloc_bytes}, {"memory_bandwidth_gbs", d.memory_bandwidth_gbs},
                      {"compute_units", d.compute_units},
                      {"int8_dot", d.int8_dot}, {"fp16", d.fp16}, {"subgroups", d.subgroups},
                      {"subgroup_size", d.subgroup_size}, {"features", d.features},
                      {"is_gpu", d.is_gpu}, {"is_software", d.is_software}, {"is_fake", d.is_fake}};
  if (d.backend == "cuda") {
    j["compute_capability"] = d.compute_capability;
    j["sm_count"] = d.sm_count;
  } else if (d.backend == "hip") {
    j["gfx_arch"] = d.compute_capability;
  }
  return j;
}

int run(const DevicesFlags& f) {
  // Like the other commands, BITNET_GPU_FAKE adds fakes unless strict mode is on.
  ModelFlags none;
  auto options = engine_options_from_env(none);
  if (!options.ok()) return fail(options.status());
  const auto backends = list_devices(options->strict ? std::vector<std::string>{} : options->fake_gpus);
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const BackendDescription& b : backends) {
      nlohmann::json devices = nlohmann::json::array();
      for (const DeviceDescription& d : b.devices) devices.push_back(to_json(d));
      out.push_back({{"backend", b.backend}, {"compiled", b.compiled}, {"available", b.available},
                     {"reason", b.reason}, {"devices", devices}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const BackendDescription& b : backends) {
    if (!b.compiled) {
      fmt::print("{}: not compiled into this build\n", b.backend);
    } else {
      fmt::print("{}: {}{}\n", b.backend, b.available ? "available" : "unavailable",
                 b.reason.empty() ? "" : " (" + b.reason + ")");
    }
    for (const DeviceDescription& d : b.devices) {
      fmt::print("  [{}] {}: {}{}{}\n", d.index, d.id, d.name, d.is_software ? " (software)" : "",
                 d.is_fake ? " (fake)" : "");
      fmt::print("      vendor {} | driver {} | api {}\n", d.vendor.empty() ? "-" : d.vendor,
                 d.driver_version.empty() ? "-" : d.driver_version, d.api_version.empty() ? "-" : d.api_version);
      fmt::print("      memory {}{} | max buffer {} | compute units {}\n", mib(d.memory_bytes),
                 d.memory_bandwidth_gbs > 0 ? fmt::format(" ({:.0f} GB/s peak)", d.memory_bandwidth_gbs) : "",
                 mib(d.max_alloc_bytes), d.compute_units);
      fmt::print("      int8 dot {} | fp16 {} | subgroups {}{}\n", yes_no(d.int8_dot), yes_no(d.fp16),
                 yes_no(d.subgroups), d.subgroup_size ? fmt::format(" ({})", d.subgroup_size) : "");
      if (d.backend == "cuda") {
        fmt::print("      compute capability {} | SMs {}\n", d.compute_capability, d.sm_count);
      } else if (d.backend == "hip") {
        fmt::print("      architecture {}\n", d.compute_capability);
      }
      if (!d.features.empty()) fmt::print("      features {}\n", fmt::join(d.features, " "));
    }
  }
  return 0;
}

}  // namespace

void add_devices_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<DevicesFlags>();
  CLI::App* cmd = app.add_subcommand("devices", "list backends and devices, and why a backend is unavailable");
  cmd->add_flag("--json", flags->json, "machine-readable output");
  cmd->callback([flags, &runner] { runner = [flags] { return run(*flags); }; });
}

}  // namespace bitnet::cli
