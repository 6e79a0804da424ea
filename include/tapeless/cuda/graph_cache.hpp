// A captured CUDA graph and what it was captured for: fit() captures its epochs once
// and replays them on later calls of the same shape and settings.
#pragma once

#include <cuda_runtime.h>
#include <thrust/memory.h>

#include <cstddef>
#include <string>

#include "tapeless/cuda/errors.hpp"

namespace tl {

namespace detail {
// The bytes of some device buffers' addresses (thrust vectors), for a key_type's
// `addresses`.
template <class... Buffers>
std::string addresses_of(const Buffers&... buffers) {
  std::string bytes;
  const auto append = [&](const void* p) { bytes.append(reinterpret_cast<const char*>(&p), sizeof p); };
  (append(thrust::raw_pointer_cast(buffers.data())), ...);
  return bytes;
}

// An instantiated CUDA graph and what it was captured for. Copies start empty: a graph
// holds the pointers of the state that captured it.
class graph_cache {
 public:
  struct key_type {
    const void* x;
    const void* y;
    std::size_t batch, epochs;
    std::string settings;   // the bytes of the loss and optimizer objects, baked into the kernels
    std::string addresses;  // every buffer the graph reads or writes: a reallocated one (a
                            // train_step on a larger batch grows them) means a new capture
    bool operator==(const key_type&) const = default;
  };
  graph_cache() = default;
  graph_cache(const graph_cache&) {}
  graph_cache& operator=(const graph_cache&) { return *this; }
  ~graph_cache() { reset(); }

  bool holds(const key_type& k) const { return exec_ && key_ == k; }
  void reset() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (stream_) cudaStreamDestroy(stream_);
    exec_ = nullptr;
    stream_ = nullptr;
  }
  cudaStream_t stream() {
    if (!stream_) TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return stream_;
  }
  // Captures what `record(stream)` enqueues, instantiates it and keeps it under `k`.
  template <class Record>
  void capture(const key_type& k, Record record) {
    if (exec_) TL_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
    cudaGraph_t graph;
    TL_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    try {
      record(stream_);
    } catch (...) {  // end the capture, or every later call on the stream fails too
      if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess) cudaGraphDestroy(graph);
      throw;
    }
    TL_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    TL_CUDA_CHECK(status);
    key_ = k;
  }
  void launch() { TL_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
  key_type key_{};
};
}  // namespace detail

}  // namespace tl
