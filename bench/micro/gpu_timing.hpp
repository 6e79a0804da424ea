// What the GPU microbenchmarks that time kernels as CUDA graphs share
// (block_sums_gpu.cu, general_sums_gpu.cu): device buffers, NaN poisoning, a graph of
// launches timed between two CUDA events, and errors turned into a failed benchmark.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <exception>
#include <utility>
#include <vector>

#include "tapeless/cuda/errors.hpp"

namespace gpu_timing {

// Uninitialized device memory (block_sums' column inputs reach 32 GiB), freed without
// throwing: a static one is freed at exit, when the CUDA runtime may be gone.
template <class U>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t n) : n_(n) { TL_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(U))); }
  device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  device_buffer& operator=(device_buffer o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~device_buffer() { cudaFree(p_); }
  U* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::vector<U> to_host() const {
    std::vector<U> h(n_);
    TL_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(U), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  U* p_ = nullptr;
  std::size_t n_ = 0;
};

// NaN everywhere: an entry a variant leaves unwritten fails the check.
template <class U>
void poison(const device_buffer<U>& b) {
  TL_CUDA_CHECK(cudaMemset(b.get(), 0xff, b.size() * sizeof(U)));
}

// Replays `reps` calls of launch(stream), captured as one graph, once per iteration;
// the iteration's time is the mean per launch.
template <class Launch>
void time_launches(benchmark::State& state, int reps, const Launch& launch) {
  struct resources {
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~resources() {
      if (stop) cudaEventDestroy(stop);
      if (start) cudaEventDestroy(start);
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      if (stream) cudaStreamDestroy(stream);
    }
  } r;
  TL_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  TL_CUDA_CHECK(cudaEventCreate(&r.start));
  TL_CUDA_CHECK(cudaEventCreate(&r.stop));
  TL_CUDA_CHECK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < reps; ++i) launch(r.stream);
  TL_CUDA_CHECK(cudaStreamEndCapture(r.stream, &r.graph));
  TL_CUDA_CHECK(cudaGetLastError());
  TL_CUDA_CHECK(cudaGraphInstantiate(&r.exec, r.graph, 0));
  TL_CUDA_CHECK(cudaGraphLaunch(r.exec, r.stream));  // warm-up
  TL_CUDA_CHECK(cudaStreamSynchronize(r.stream));
  for (auto _ : state) {
    TL_CUDA_CHECK(cudaEventRecord(r.start, r.stream));
    TL_CUDA_CHECK(cudaGraphLaunch(r.exec, r.stream));
    TL_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
    TL_CUDA_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    state.SetIterationTime(double(ms) * 1e-3 / reps);
  }
}

// Runs body(); a thrown CUDA or allocation error fails the benchmark instead of the program.
template <class Body>
void guarded(benchmark::State& state, const Body& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace gpu_timing
