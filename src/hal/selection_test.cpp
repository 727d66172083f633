// Selection rules over hand-made probe results (real, software and fake devices).
#include "hal/selection.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hal/registry.h"

namespace bitnet::hal {
namespace {

DeviceInfo device(const std::string& backend, int index, const std::string& id, bool gpu, bool software) {
  DeviceInfo d;
  d.backend = backend;
  d.index = index;
  d.id = id;
  d.is_gpu = gpu;
  d.is_software = software;
  return d;
}

std::vector<BackendProbe> probes(bool real_cuda, bool real_vulkan) {
  std::vector<BackendProbe> p;
  p.push_back({"cpu", true, true, "", {device("cpu", 0, "cpu-scalar", false, false)}});
  BackendProbe cuda{"cuda", true, real_cuda, real_cuda ? "" : "no CUDA driver", {}};
  if (real_cuda) cuda.devices.push_back(device("cuda", 0, "cuda:0", true, false));
  p.push_back(cuda);
  BackendProbe vk{"vulkan", true, true, "", {device("vulkan", 0, "vulkan:lavapipe", false, true)}};
  if (real_vulkan) vk.devices.push_back(device("vulkan", 1, "vulkan:1", true, false));
  p.push_back(vk);
  p.push_back({"opencl", true, true, "", {device("opencl", 0, "opencl:pocl", false, true)}});
  return p;
}

std::vector<std::string> ids(const SelectionPlan& plan) {
  std::vector<std::string> out;
  for (const DeviceInfo& d : plan.candidates) out.push_back(d.id);
  return out;
}

TEST(Selection, AutoNeverPicksSoftwareDevices) {
  auto plan = plan_selection(probes(false, false), {"auto", "", -1, false});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ids(*plan), (std::vector<std::string>{"cpu-scalar"}));
  EXPECT_EQ(plan->detected, (std::vector<std::string>{"cpu-scalar", "vulkan:lavapipe", "opencl:pocl"}));
}

TEST(Selection, AutoPrefersRealGpusInBackendOrder) {
  auto plan = plan_selection(probes(true, true), {"auto", "", -1, false});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ids(*plan), (std::vector<std::string>{"cuda:0", "vulkan:1", "cpu-scalar"}));
}

TEST(Selection, ExplicitBackendUsesSoftwareDevices) {
  auto vk = plan_selection(probes(false, false), {"vulkan", "", -1, false});
  ASSERT_TRUE(vk.ok());
  EXPECT_EQ(ids(*vk), (std::vector<std::string>{"vulkan:lavapipe", "cpu-scalar"}));
  auto cl = plan_selection(probes(false, false), {"opencl", "", -1, false});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(ids(*cl), (std::vector<std::string>{"opencl:pocl", "cpu-scalar"}));
}

TEST(Selection, GpuTakesRealFirstThenSoftware) {
  auto plan = plan_selection(probes(false, true), {"gpu", "", -1, false});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ids(*plan), (std::vector<std::string>{"vulkan:1", "vulkan:lavapipe", "opencl:pocl", "cpu-scalar"}));
}

TEST(Selection, GpuBackendAndDeviceNarrowTheChoice) {
  auto by_backend = plan_selection(probes(true, true), {"gpu", "opencl", -1, false});
  ASSERT_TRUE(by_backend.ok());
  EXPECT_EQ(ids(*by_backend), (std::vector<std::string>{"opencl:pocl", "cpu-scalar"}));
  auto by_index = plan_selection(probes(true, true), {"vulkan", "", 0, false});
  ASSERT_TRUE(by_index.ok());
  EXPECT_EQ(ids(*by_index), (std::vector<std::string>{"vulkan:lavapipe", "cpu-scalar"}));
}

TEST(Selection, UnavailableRequestFallsBackOrFailsWhenStrict) {
  auto plan = plan_selection(probes(false, false), {"cuda", "", -1, false});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ids(*plan), (std::vector<std::string>{"cpu-scalar"}));
  ASSERT_FALSE(plan->notes.empty());
  EXPECT_NE(plan->notes.front().find("no cuda device"), std::string::npos) << plan->notes.front();
  EXPECT_NE(plan->notes.front().find("no CUDA driver"), std::string::npos) << plan->notes.front();

  auto strict = plan_selection(probes(false, false), {"cuda", "", -1, true});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(strict.status().message().find("strict mode"), std::string::npos);

  auto strict_gpu = plan_selection(probes(true, false), {"cuda", "", -1, true});
  ASSERT_TRUE(strict_gpu.ok());
  EXPECT_EQ(ids(*strict_gpu), (std::vector<std::string>{"cuda:0"}));  // no CPU fallback
}

// An explicit backend's failure names that backend's reason only; `gpu` names every GPU
// backend's.
TEST(Selection, AnExplicitBackendsReasonIsItsOwn) {
  std::vector<BackendProbe> p = probes(false, false);
  p.resize(2);  // the CPU and CUDA without a driver
  p.push_back({"hip", true, false, "no HIP device (hipGetDeviceCount: 100 hipErrorNoDevice)", {}});
  auto hip = plan_selection(p, {"hip", "", -1, true});
  ASSERT_FALSE(hip.ok());
  EXPECT_NE(hip.status().message().find("hip: no HIP device"), std::string::npos) << hip.status().message();
  EXPECT_EQ(hip.status().message().find("CUDA"), std::string::npos) << hip.status().message();
  auto gpu = plan_selection(p, {"gpu", "", -1, true});
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("hip: no HIP device"), std::string::npos) << gpu.status().message();
  EXPECT_NE(gpu.status().message().find("cuda: no CUDA driver"), std::string::npos) << gpu.status().message();
}

// A backend that lists a device it cannot run (an AMD GPU whose architecture the build lacks)
// has it detected but never a candidate: auto, even strict, runs on the CPU, and an explicit
// request names the backend's reason.
TEST(Selection, ADeviceItsBackendCannotRunIsNeverACandidate) {
  std::vector<BackendProbe> p = probes(false, false);
  p.resize(2);
  BackendProbe hip{"hip", true, false, "this build has no code objects for gfx1100", {}};
  hip.devices.push_back(device("hip", 0, "hip:0", true, false));
  p.push_back(hip);
  for (const bool strict : {false, true}) {
    auto a = plan_selection(p, {"auto", "", -1, strict});
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(ids(*a), (std::vector<std::string>{"cpu-scalar"}));
    EXPECT_NE(std::find(a->detected.begin(), a->detected.end(), "hip:0"), a->detected.end());
  }
  auto h = plan_selection(p, {"hip", "", -1, true});
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("no code objects for gfx1100"), std::string::npos) << h.status().message();
}

TEST(Selection, RejectsUnknownNames) {
  EXPECT_EQ(plan_selection(probes(false, false), {"tpu", "", -1, false}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_selection(probes(false, false), {"gpu", "metal", -1, false}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Registry, FakeGpusAreListedAndSelectedButCannotRun) {
  const auto real = probe_backends({});
  const auto faked = probe_backends({.fake_gpus = {"cuda", "rocm"}, .cpu_isa = {}});
  int fakes = 0;
  for (const BackendProbe& p : faked) {
    for (const DeviceInfo& d : p.devices) {
      if (!d.is_fake) continue;
      ++fakes;
      EXPECT_TRUE(d.is_gpu);
      EXPECT_TRUE(d.backend == "cuda" || d.backend == "hip") << d.backend;
      auto b = create_backend(d, {1, ""});
      ASSERT_FALSE(b.ok());
      EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
    }
  }
  EXPECT_EQ(fakes, 2);
  auto plan = plan_selection(faked, {"auto", "", -1, false});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->candidates.front().is_fake);   // auto picks the "real" GPU first ...
  EXPECT_EQ(plan->candidates.back().backend, "cpu");  // ... and keeps the CPU to fall back to
  ASSERT_FALSE(real.empty());
  EXPECT_EQ(real.front().backend, "cpu");
  EXPECT_TRUE(real.front().available);
}

TEST(Registry, TheCpuIdNamesTheKernelSetAndAnUnknownSetIsAClearError) {
  const auto probes = probe_backends({{}, "scalar"});
  ASSERT_EQ(probes.front().backend, "cpu");
  ASSERT_EQ(probes.front().devices.size(), 1u);
  EXPECT_EQ(probes.front().devices[0].id, "cpu-scalar");
  EXPECT_FALSE(probes.front().devices[0].int8_dot);  // the scalar set multiplies in plain C++
  // The best set this CPU has: int8 dot products exactly when it runs vpdpbusd or sdot/smmla.
  const DeviceInfo best = probe_backends({{}, ""}).front().devices.at(0);
  const bool dot_set = best.id == "cpu-avx512vnni" || best.id == "cpu-avxvnni" || best.id == "cpu-neon-dotprod" ||
                       best.id == "cpu-neon-i8mm";
  EXPECT_EQ(best.int8_dot, dot_set) << best.id;

  const auto bogus = probe_backends({{}, "avx9"});
  EXPECT_FALSE(bogus.front().available);
  const auto plan = plan_selection(bogus, {"auto", "", -1, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("avx9"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("scalar"), std::string::npos) << plan.status().message();
}

}  // namespace
}  // namespace bitnet::hal
