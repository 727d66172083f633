#include "backends/opencl/cl_kernels.h"

#include <fmt/format.h>

#include <vector>

#include "core/check.h"

namespace bitnet::opencl {

namespace {

// common.cl first: it holds the pragmas and helpers the others use.
constexpr std::string_view kSources[] = {"common.cl", "elementwise.cl", "matmul_float.cl",
                                         "matmul_quant.cl", "matmul_q8.cl", "matmul_w2a8.cl", "norm_rope_attn.cl",
                                         "top_k.cl"};

std::string build_log(cl_program program, cl_device_id device) {
  size_t n = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n > 0) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

Result<Kernels> Kernels::build(cl_context context, const ClDevice& device, const ProgramOptions& options) {
  std::string source;
  for (std::string_view name : kSources) {
    const std::span<const uint8_t> bytes = embedded_file(name);
    if (bytes.empty()) return internal_error(fmt::format("kernel source {} is not embedded", name));
    source += fmt::format("// ---- {}\n", name);
    source.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    source += '\n';
  }
  Kernels k;
  k.options_ = options;
  k.build_options_ = fmt::format("-cl-std=CL1.2 -DBITNET_WG={} -DBITNET_TOKEN_TILE={}", options.work_group, kTokenTile);
  if (options.fp64) k.build_options_ += " -DBITNET_HAS_FP64";
  if (options.int8_dot) k.build_options_ += " -DBITNET_INT8_DOT";
  if (options.correctly_rounded_div) k.build_options_ += " -cl-fp32-correctly-rounded-divide-sqrt";

  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  k.program_ = ClProgram(clCreateProgramWithSource(context, 1, &text, &length, &err));
  BITNET_CL_RETURN_IF_ERROR(err, "clCreateProgramWithSource");
  err = clBuildProgram(k.program_.get(), 1, &device.device, k.build_options_.c_str(), nullptr, nullptr);
  if (err == CL_BUILD_PROGRAM_FAILURE) {
    return internal_error(fmt::format("building the OpenCL kernels ({}) failed:\n{}", k.build_options_,
                                      build_log(k.program_.get(), device.device)));
  }
  BITNET_CL_RETURN_IF_ERROR(err, "clBuildProgram");

  cl_uint n_kernels = 0;
  BITNET_CL_RETURN_IF_ERROR(clCreateKernelsInProgram(k.program_.get(), 0, nullptr, &n_kernels),
                            "clCreateKernelsInProgram");
  std::vector<cl_kernel> kernels(n_kernels);
  BITNET_CL_RETURN_IF_ERROR(clCreateKernelsInProgram(k.program_.get(), n_kernels, kernels.data(), nullptr),
                            "clCreateKernelsInProgram");
  for (cl_kernel raw : kernels) {
    ClKernel kernel(raw);
    char name[128] = {};
    BITNET_CL_RETURN_IF_ERROR(clGetKernelInfo(raw, CL_KERNEL_FUNCTION_NAME, sizeof(name) - 1, name, nullptr),
                              "clGetKernelInfo");
    size_t max_wg = 0;
    BITNET_CL_RETURN_IF_ERROR(clGetKernelWorkGroupInfo(raw, device.device, CL_KERNEL_WORK_GROUP_SIZE,
                                                       sizeof(max_wg), &max_wg, nullptr),
                              "clGetKernelWorkGroupInfo");
    if (max_wg < static_cast<size_t>(options.work_group)) {
      return unsupported(fmt::format("OpenCL kernel {} runs at most {} work-items per group, {} needed",
                                     name, max_wg, options.work_group));
    }
    k.kernels_.emplace(name, std::move(kernel));
  }
  return k;
}

cl_kernel Kernels::get(std::string_view name) const {
  const auto it = kernels_.find(name);
  BITNET_CHECK(it != kernels_.end());
  return it->second.get();
}

}  // namespace bitnet::opencl
