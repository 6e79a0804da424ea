// Matrix products through cuBLASLt, for the layer-at-a-time path (cuda/layered.hpp):
//   C (m x n) = op(A) op(B) + beta C,   column-major, as BLAS writes them
// cuBLASLt's heuristics propose kernels per shape; the first proposal is taken, and the
// choice, the descriptors and the matrix layouts are kept, so later calls only launch
// — inside a captured graph too (the workspace is ours: cuBLASLt allocates nothing
// while capturing). Scalars are host values, read at launch.
// TAPELESS_BLAS_TUNING=1 in the environment times up to blas_candidates proposals on
// a product's first call (on its own operands; not inside a capture, where nothing can
// be timed) and keeps the fastest, as XLA's autotuner does. It is off by default: on
// the H200 it changed whole steps by 0.94-1.07x (median 1.00x, the 20 cuBLASLt models
// of bench/layered_fit_gpu.cu, docs/performance.md 2026-12-04), and without it the same
// kernels, so the same rounding, run in every process.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>

#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/tile_layout.hpp"

namespace tl::detail {
inline void cublas_check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw cuda_error(cudaErrorUnknown, std::string("tapeless: ") + call + " failed at " + file + ":" +
                                           std::to_string(line) + ": " + cublasLtGetStatusName(status) + ": " +
                                           cublasLtGetStatusString(status));
}
}  // namespace tl::detail
#define TL_CUBLAS_CHECK(call) ::tl::detail::cublas_check((call), #call, __FILE__, __LINE__)

namespace tl::detail::gpu {

// One product's shape: C (m x n, leading dimension ldc) = op(A) op(B), with A stored
// as (transpose_a ? k x m : m x k) and B as (transpose_b ? n x k : k x n).
struct blas_shape {
  bool transpose_a, transpose_b;
  std::uint64_t m, n, k, lda, ldb, ldc;
  auto values() const { return std::make_tuple(transpose_a, transpose_b, m, n, k, lda, ldb, ldc); }
};

// The largest power of two, up to 256, that divides a pointer's address: cuBLASLt's
// heuristics assume 256-byte aligned operands unless told otherwise.
inline std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align) align /= 2;
  return align;
}

// How many of cuBLASLt's proposals a new product times, and from what size: a product
// estimated under ~5 µs on an H200 (at 50 TFLOP/s and 3 TB/s, whichever is slower) is
// bound by its launch, whatever the kernel. The bytes count matters for the thin
// products, such as the bias gradient (deltas times a column of ones).
inline constexpr int blas_candidates = 8;
inline double blas_estimated_seconds(const blas_shape& s, std::size_t operand_bytes, std::size_t result_bytes) {
  const double m = double(s.m), n = double(s.n), k = double(s.k);
  const double bytes = (m * k + k * n) * double(operand_bytes) + m * n * double(result_bytes);
  return std::max(2 * m * n * k / 50e12, bytes / 3e12);
}
inline constexpr double blas_tuning_min_seconds = 5e-6;
// TAPELESS_BLAS_TUNING=1: time the proposals; read once.
inline bool blas_tuning_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TAPELESS_BLAS_TUNING");
    return env && std::strcmp(env, "1") == 0;
  }();
  return enabled;
}

// Two CUDA events, destroyed with their owner: tune()'s stopwatch.
struct event_pair {
  cudaEvent_t start = nullptr, stop = nullptr;
  event_pair() {
    TL_CUDA_CHECK(cudaEventCreate(&start));
    if (cudaEventCreate(&stop) != cudaSuccess) {
      cudaEventDestroy(start);
      throw cuda_error(cudaErrorUnknown, "tapeless: cudaEventCreate failed while timing cuBLASLt's kernels");
    }
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  ~event_pair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

class blas_products {
 public:
  // cuBLASLt's recommended workspace on Hopper, one for each lane: products on two
  // streams at once (cuda/side_stream.hpp) must not share one, as split-K kernels keep
  // their partial sums there.
  static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;
  static constexpr int lanes = 2;
  static constexpr std::size_t total_workspace_bytes = lanes * workspace_bytes;

  blas_products() = default;
  blas_products(const blas_products&) {}  // copies start empty: plans hold a handle
  blas_products& operator=(const blas_products&) { return *this; }
  ~blas_products() { reset(); }

  // C = op(A) op(B) + beta C. A and B are float, double or bfloat16; C is float or
  // double, as are the sums. Float operands are rounded as `precision` says (tf32 / bf16
  // let cuBLASLt use tensor cores with fp32 sums); bfloat16 operands are multiplied as
  // they are, with fp32 sums. `lane`: which workspace (0 or 1); products that may run at
  // the same time must use different lanes.
  template <class A, class C>
  void multiply(const blas_shape& s, const A* a, const A* b, C* c, C beta, matmul_precision precision,
                cudaStream_t stream, int lane = 0) {
    static_assert(std::is_same_v<C, float> || std::is_same_v<C, double>);
    static_assert(std::is_same_v<A, C> || (std::is_same_v<A, __nv_bfloat16> && std::is_same_v<C, float>));
    prepare();
    const key k{s.values(), type_code<A>() * 4 + type_code<C>(), int(precision), alignment_of(a), alignment_of(b),
                alignment_of(c)};
    auto found = plans_.find(k);
    if (found == plans_.end()) found = plans_.emplace(k, make_plan<A, C>(s, precision, k)).first;
    plan& p = found->second;
    if (!p.tuned) tune<A, C>(p, s, a, b, stream, lane);
    const C alpha = C(1);
    TL_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo,
                                   lane_workspace(lane), workspace_bytes, stream));
  }

  // The handle and workspace: called before a graph capture, which allows no allocation.
  bool ready() const { return handle_ != nullptr; }
  const device_buffer<unsigned char>& workspace() const { return workspace_; }
  void prepare() {
    if (handle_) return;
    TL_CUBLAS_CHECK(cublasLtCreate(&handle_));
    workspace_.resize(total_workspace_bytes);
  }

  void reset() {
    for (auto& [k, p] : plans_) p.destroy();
    plans_.clear();
    if (handle_) cublasLtDestroy(handle_);
    handle_ = nullptr;
  }

 private:
  // shape, operand and result types, precision, alignments of A, B and C
  using key = std::tuple<decltype(std::declval<blas_shape>().values()), int, int, std::uint32_t, std::uint32_t,
                         std::uint32_t>;
  struct plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    cublasLtMatmulAlgo_t candidates[blas_candidates] = {};  // the heuristics' proposals, best first
    int candidate_count = 0;
    bool tuned = false;  // algo chosen by timing them, or for good
    void destroy() {
      if (desc) cublasLtMatmulDescDestroy(desc);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (c) cublasLtMatrixLayoutDestroy(c);
    }
  };

  template <class T>
  static constexpr int type_code() {
    return std::is_same_v<T, double> ? 2 : std::is_same_v<T, __nv_bfloat16> ? 1 : 0;
  }
  template <class T>
  static constexpr cudaDataType_t data_type() {
    return std::is_same_v<T, double> ? CUDA_R_64F : std::is_same_v<T, __nv_bfloat16> ? CUDA_R_16BF : CUDA_R_32F;
  }

  template <class A, class C>
  plan make_plan(const blas_shape& s, matmul_precision precision, const key& k) {
    const cudaDataType_t operand_type = data_type<A>(), type = data_type<C>();
    // FAST_16BF is not asked for: for float operands cuBLASLt's heuristics chose the
    // same TF32 kernels as FAST_TF32 (equal results); bf16 products take bf16 operands.
    const cublasComputeType_t compute = std::is_same_v<C, double>                           ? CUBLAS_COMPUTE_64F
                                        : std::is_same_v<A, __nv_bfloat16>                  ? CUBLAS_COMPUTE_32F
                                        : precision != matmul_precision::fp32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                              : CUBLAS_COMPUTE_32F;
    plan p;
    try {
      TL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, type));
      const cublasOperation_t ta = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
      TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      TL_CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&p.a, operand_type, s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k, s.lda));
      TL_CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&p.b, operand_type, s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n, s.ldb));
      TL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, type, s.m, s.n, s.ldc));
      cublasLtMatmulPreference_t preference = nullptr;
      TL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
      const std::uint64_t bytes = workspace_bytes;
      const std::uint32_t align[3] = {std::get<3>(k), std::get<4>(k), std::get<5>(k)};
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0], 4);
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1], 4);
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2], 4);
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[2], 4);
      cublasLtMatmulHeuristicResult_t results[blas_candidates] = {};
      int found = 0;
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, preference,
                                                                   blas_candidates, results, &found);
      cublasLtMatmulPreferenceDestroy(preference);
      TL_CUBLAS_CHECK(status);
      if (found == 0)
        throw cuda_error(cudaErrorNotSupported, "tapeless: cuBLASLt has no kernel for a " + std::to_string(s.m) + " x " +
                                                    std::to_string(s.n) + " x " + std::to_string(s.k) +
                                                    " product at this precision; try matmul_precision::fp32");
      p.algo = results[0].algo;
      for (int i = 0; i < found; ++i)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates[p.candidate_count++] = results[i].algo;
      p.tuned = p.candidate_count < 2 || !blas_tuning_enabled() ||
                blas_estimated_seconds(s, sizeof(A), sizeof(C)) < blas_tuning_min_seconds;
    } catch (...) {
      p.destroy();
      throw;
    }
    return p;
  }

  // Times each candidate on the product's own operands (3 launches after one to warm
  // up, into a scratch C with beta = 0) and keeps the fastest. Not while `stream` is
  // being captured: the plan stays untuned until a call outside a capture.
  template <class A, class C>
  void tune(plan& p, const blas_shape& s, const A* a, const A* b, cudaStream_t stream, int lane) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return;
    device_buffer<C> scratch(s.ldc * s.n);
    const event_pair e;
    const C alpha = C(1), beta = C(0);
    C* c = scratch.data();
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < p.candidate_count; ++i) {
      const cublasLtMatmulAlgo_t& algo = p.candidates[i];
      const auto launch = [&] {
        return cublasLtMatmul(handle_, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &algo, lane_workspace(lane),
                              workspace_bytes, stream);
      };
      if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // a proposal that cannot run here
      TL_CUDA_CHECK(cudaEventRecord(e.start, stream));
      for (int r = 0; r < 3; ++r) TL_CUBLAS_CHECK(launch());
      TL_CUDA_CHECK(cudaEventRecord(e.stop, stream));
      TL_CUDA_CHECK(cudaEventSynchronize(e.stop));
      float ms = 0;
      TL_CUDA_CHECK(cudaEventElapsedTime(&ms, e.start, e.stop));
      if (ms < best) best = ms, p.algo = algo;
    }
    p.tuned = true;
  }

  void* lane_workspace(int lane) {
    return workspace_.data() + std::size_t(lane) * workspace_bytes;
  }

  cublasLtHandle_t handle_ = nullptr;
  device_buffer<unsigned char> workspace_;
  std::map<key, plan> plans_;
};

}  // namespace tl::detail::gpu
