// Kernel benchmark of the CUDA backend: per GEMV shape of BitNet b1.58 2B-4T, microseconds
// per call and the achieved GB/s against the device's peak (memory clock x bus width).
// Weights are rotated over enough copies to exceed twice the L2 cache, so the figures are
// DRAM reads, as in decode. Exits 77 (skipped) without a CUDA device.
//   bitnet_cuda_bench [--iters N]
#include "backends/cuda/gpu_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/w2a8_math.h"
#include "core/fp16.h"

namespace bitnet::cuda {
namespace {

constexpr int kSkipped = 77;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Device memory freed at scope exit.
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t n) { ok(cudaMalloc(&p, n), "cudaMalloc"); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  ~DeviceMem() { (void)cudaFree(p); }
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

struct Device {
  double peak_gbs = 0.0;
  int64_t l2_bytes = 0;
  std::string name;
};

// Copies of a weight of `bytes` bytes that together exceed twice the L2 cache and 512 MiB: AMD's
// Infinity Cache (up to 256 MiB) sits behind an L2 that the runtime reports alone.
int copies_for(int64_t bytes, const Device& d) {
  const int64_t span = std::max<int64_t>(2 * d.l2_bytes, int64_t{512} << 20);
  const int64_t n = (span + bytes - 1) / bytes;
  return static_cast<int>(n < 1 ? 1 : n);
}

// Microseconds per call of `launch(copy, stream)` over `iters` calls rotating over the copies:
// launched one by one (each call pays the launch), and replayed from a CUDA graph of the same
// calls, as a decode step runs (the kernels back to back, the figure that bounds decode).
struct Timing {
  double plain_us = 0.0;
  double graph_us = 0.0;
};

template <class Launch>
Timing time_us(int iters, int n_copies, Launch launch) {
  Timing t;
  // the inputs' pageable copies have landed (a non-blocking stream does not wait for them)
  if (!ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return t;
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return t;
  for (int i = 0; i < 3 * n_copies; ++i) launch(i % n_copies, stream);
  cudaEvent_t start, stop;
  (void)cudaEventCreate(&start);
  (void)cudaEventCreate(&stop);
  const auto elapsed_us = [&] {
    (void)cudaEventSynchronize(stop);
    float ms = 0.0f;
    (void)cudaEventElapsedTime(&ms, start, stop);
    return 1000.0 * ms / iters;
  };
  (void)cudaEventRecord(start, stream);
  for (int i = 0; i < iters; ++i) launch(i % n_copies, stream);
  (void)cudaEventRecord(stop, stream);
  t.plain_us = elapsed_us();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture")) {
    for (int i = 0; i < iters; ++i) launch(i % n_copies, stream);
    if (ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") &&
        ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
      (void)cudaGraphLaunch(exec, stream);  // warm-up
      (void)cudaEventRecord(start, stream);
      (void)cudaGraphLaunch(exec, stream);
      (void)cudaEventRecord(stop, stream);
      t.graph_us = elapsed_us();
    }
  }
  if (t.graph_us == 0.0) {
    std::fprintf(stderr, "no graph replay: the figures below are plain launches\n");
    t.graph_us = t.plain_us;
  }
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaStreamDestroy(stream);
  return t;
}

void report(const char* name, int64_t n_rows, int64_t n_cols, const char* format, int64_t bytes, const Timing& t,
            const Device& d) {
  const double gbs = static_cast<double>(bytes) / (t.graph_us * 1e3);
  std::printf("%-12s %6lld x %-6lld %-5s %8.2f us %8.2f us in a graph %8.1f GB/s %5.1f %% of peak\n", name,
              static_cast<long long>(n_rows), static_cast<long long>(n_cols), format, t.plain_us, t.graph_us, gbs,
              100.0 * gbs / d.peak_gbs);
}

// One decode token's product over the weights of `rows` (1 to kGemvGroupMax weights of n_cols
// columns, one launch: w2a8_gemv_group, as the backend runs q, k, v and gate, up).
double bench_w2a8(const char* name, std::initializer_list<int64_t> rows, int64_t n_cols, int iters, const Device& d,
                  std::mt19937& rng) {
  int64_t n_rows = 0;
  for (int64_t r : rows) n_rows += r;
  std::vector<uint32_t> words(static_cast<size_t>(n_rows * n_cols / kWordCols));
  for (auto& w : words) {
    uint32_t codes[kWordCols];
    for (auto& c : codes) c = static_cast<uint32_t>(rng() % 3);
    w = pack_word(codes);
  }
  const std::vector<float> scales(static_cast<size_t>(n_rows), 0.5f);
  std::vector<int8_t> q(static_cast<size_t>(n_cols));
  for (auto& v : q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<int32_t> sums(static_cast<size_t>(n_cols / kChunkCols));
  for (int64_t c = 0; c < n_cols / kChunkCols; ++c) {
    for (int64_t i = 0; i < kChunkCols; ++i) sums[static_cast<size_t>(c)] += q[static_cast<size_t>(c * kChunkCols + i)];
  }
  const int64_t w_bytes = static_cast<int64_t>(words.size() * 4 + scales.size() * 4);
  const int n_copies = copies_for(w_bytes, d);
  DeviceMem dw(words.size() * 4 * n_copies), ds(scales.size() * 4 * n_copies), dq(q.size()), dsum(sums.size() * 4),
      dact(4), dy(static_cast<size_t>(n_rows) * 4);
  for (int c = 0; c < n_copies; ++c) {
    ok(cudaMemcpy(dw.as<uint32_t>() + c * words.size(), words.data(), words.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    ok(cudaMemcpy(ds.as<float>() + c * scales.size(), scales.data(), scales.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  const float s = 12.7f;
  ok(cudaMemcpy(dq.p, q.data(), q.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  ok(cudaMemcpy(dsum.p, sums.data(), sums.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  ok(cudaMemcpy(dact.p, &s, 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  const Timing t = time_us(iters, n_copies, [&](int c, cudaStream_t stream) {
    W2cView w[kGemvGroupMax];
    float* y[kGemvGroupMax];
    int n = 0;
    int64_t row0 = 0;
    for (int64_t r : rows) {
      w[n] = W2cView{dw.as<uint32_t>() + c * words.size() + row0 * n_cols / kWordCols,
                     ds.as<float>() + c * scales.size() + row0, r, n_cols, n_cols};
      y[n] = dy.as<float>() + row0;
      row0 += r;
      ++n;
    }
    ok(w2a8_gemv_group(w, y, n, Q8View{dq.as<int8_t>(), dact.as<float>(), dsum.as<int32_t>()}, 1, stream),
       "w2a8_gemv_group");
  });
  report(name, n_rows, n_cols, "I2_S", w_bytes + n_cols + n_rows * 4, t, d);
  return t.graph_us;
}

// The head: F16 rows, or Q6_K blocks (random codes and scales, a small d; --head-type q6_K).
double bench_head(const char* name, bool q6_K, int64_t n_rows, int64_t n_cols, int iters, const Device& d,
                  std::mt19937& rng) {
  const int64_t bytes = q6_K ? n_rows * (n_cols / 256) * block_bytes(BlockFormat::kQ6_K) : n_rows * n_cols * 2;
  std::vector<uint8_t> w(static_cast<size_t>(bytes));
  std::normal_distribution<float> nd(0.0f, 0.02f);
  if (q6_K) {
    for (size_t i = 0; i + 4 <= w.size(); i += 4) {
      const auto r = static_cast<uint32_t>(rng());
      std::memcpy(&w[i], &r, 4);
    }
    const uint16_t small = fp32_to_fp16(0.001f);
    for (int64_t off = 208; off < bytes; off += block_bytes(BlockFormat::kQ6_K)) std::memcpy(&w[static_cast<size_t>(off)], &small, 2);
  } else {
    for (int64_t i = 0; i < n_rows * n_cols; ++i) {
      const uint16_t h = fp32_to_fp16(nd(rng));
      std::memcpy(&w[static_cast<size_t>(2 * i)], &h, 2);
    }
  }
  std::vector<float> x(static_cast<size_t>(n_cols));
  for (auto& v : x) v = nd(rng);
  const int n_copies = copies_for(bytes, d);
  DeviceMem dw(w.size() * n_copies), dx(x.size() * 4), dy(static_cast<size_t>(n_rows) * 4);
  for (int c = 0; c < n_copies; ++c) ok(cudaMemcpy(dw.as<uint8_t>() + c * w.size(), w.data(), w.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  ok(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  const Timing t = time_us(iters, n_copies, [&](int c, cudaStream_t stream) {
    FloatWeightView v{q6_K ? FloatFormat::kBlocks : FloatFormat::kF16, dw.as<uint8_t>() + c * w.size(), nullptr, n_rows, n_cols};
    v.block = BlockFormat::kQ6_K;
    ok(matmul_float(v, dx.as<float>(), 1, dy.as<float>(), stream), "matmul_float");
  });
  report(name, n_rows, n_cols, q6_K ? "Q6_K" : "F16", bytes + n_cols * 4 + n_rows * 4, t, d);
  return t.graph_us;
}

// One decode token's norm + quantization of n_cols (after the gate or the residual add), as the
// layer runs them between its GEMVs: bytes read and written once each.
double bench_norm(const char* name, Gate gate, int64_t n_cols, int iters, const Device& d, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(2 * n_cols));
  for (auto& v : x) v = nd(rng);
  const std::vector<float> g(static_cast<size_t>(n_cols), 1.0f);
  DeviceMem da(static_cast<size_t>(n_cols) * 4), db(static_cast<size_t>(n_cols) * 4), dg(g.size() * 4),
      dq(static_cast<size_t>(n_cols)), ds(4), dsum(static_cast<size_t>(n_cols / kChunkCols) * 4);
  ok(cudaMemcpy(da.p, x.data(), static_cast<size_t>(n_cols) * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  ok(cudaMemcpy(db.p, x.data() + n_cols, static_cast<size_t>(n_cols) * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  ok(cudaMemcpy(dg.p, g.data(), g.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  const Timing t = time_us(iters, 1, [&](int, cudaStream_t stream) {
    // kAdd writes the sum over b (b grows by a each call: the same work)
    ok(gated_rms_norm_quant(gate, da.as<float>(), gate == Gate::kNone ? nullptr : db.as<float>(), dg.as<float>(), 1, n_cols,
                            1e-5f, Q8View{dq.as<int8_t>(), ds.as<float>(), dsum.as<int32_t>()}, nullptr, stream,
                            gate == Gate::kAdd ? db.as<float>() : nullptr),
       "gated_rms_norm_quant");
  });
  const int64_t inputs = gate == Gate::kNone ? 1 : 2;
  report(name, 1, n_cols, "F32", n_cols * (4 * inputs + (gate == Gate::kAdd ? 4 : 0) + 1), t, d);
  return t.graph_us;
}

int run(int iters) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("skipped: no %s device (GetDeviceCount: %s)\n", kGpuApi, err != cudaSuccess ? cudaGetErrorName(err) : "0 devices");
    return kSkipped;
  }
  Device d;
  cudaDeviceProp prop{};
  int clock_khz = 0, bus_bits = 0, l2 = 0;
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") ||
      !ok(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0), "memory clock") ||
      !ok(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0), "bus width") ||
      !ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size")) {
    return 1;
  }
  d.name = prop.name;
  d.peak_gbs = peak_bandwidth_gbs(clock_khz, bus_bits);
  d.l2_bytes = l2;
  std::printf("device: %s, peak %.0f GB/s (memory clock %d kHz x %d bits x 2), L2 %d KiB; %d calls per shape\n",
              d.name.c_str(), d.peak_gbs, clock_khz, bus_bits, l2 / 1024, iters);
#if BITNET_HIP
  std::printf("note: the peak is right for HBM (Instinct, Vega 20); ROCm's memory clock of GDDR6 GPUs is not the data rate's half\n");
#endif
  std::mt19937 rng(1);
  // BitNet b1.58 2B-4T, one decode token: 7 ternary linears per layer x 30 layers, F16 tied head;
  // each alone, then as the backend launches them (q, k, v and gate, up grouped).
  double layer_us = 0.0;
  layer_us += bench_w2a8("attn_q", {2560}, 2560, iters, d, rng);
  layer_us += 2 * bench_w2a8("attn_k/v", {640}, 2560, iters, d, rng);
  const double o_us = bench_w2a8("attn_output", {2560}, 2560, iters, d, rng);
  layer_us += o_us;
  layer_us += 2 * bench_w2a8("ffn_gate/up", {6912}, 2560, iters, d, rng);
  const double down_us = bench_w2a8("ffn_down", {2560}, 6912, iters, d, rng);
  layer_us += down_us;
  double grouped_us = o_us + down_us;
  grouped_us += bench_w2a8("attn_qkv", {2560, 640, 640}, 2560, iters, d, rng);
  grouped_us += bench_w2a8("ffn_gate+up", {6912, 6912}, 2560, iters, d, rng);
  const double head_us = bench_head("output", false, 128256, 2560, iters, d, rng);
  const double q6_K_head_us = bench_head("output", true, 128256, 2560, iters, d, rng);
  // the norms of a layer: add + norm before q, k, v; the sub-norm before o; add + norm before
  // gate, up; the gated sub-norm before down
  double norms_us = 2 * bench_norm("add+norm", Gate::kAdd, 2560, iters, d, rng);
  norms_us += bench_norm("norm", Gate::kNone, 2560, iters, d, rng);
  norms_us += bench_norm("relu2+norm", Gate::kRelu2, 6912, iters, d, rng);
  std::printf("norms of one token's layer: %.1f us, x 30 = %.2f ms\n", norms_us, 30 * norms_us / 1e3);
  if (!ok(cudaGetLastError(), "kernels")) return 1;
  for (const auto& [what, us] : {std::pair{"one launch each", layer_us}, std::pair{"grouped", grouped_us}}) {
    for (const auto& [head, h_us] : {std::pair{"F16", head_us}, std::pair{"Q6_K", q6_K_head_us}}) {
      std::printf("GEMVs of one token, %s, %s head: 30 x %.1f us + %.1f us = %.2f ms (the GEMV bound on decode: %.0f tokens/s)\n",
                  what, head, us, h_us, (30 * us + h_us) / 1e3, 1e6 / (30 * us + h_us));
    }
  }
  return 0;
}

}  // namespace
}  // namespace bitnet::cuda

int main(int argc, char** argv) {
  int iters = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--iters N]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 1) iters = 1;
  return bitnet::cuda::run(iters);
}
