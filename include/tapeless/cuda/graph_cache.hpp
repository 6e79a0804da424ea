// Captured CUDA graphs and what they were captured for: fit() captures its steps once
// and replays them, in the same call and in later ones of the same shape and settings.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "tapeless/cuda/errors.hpp"

namespace tl {

namespace detail {
// The bytes of some device buffers' addresses (tl::device_buffer), for a key_type's
// `addresses`.
template <class... Buffers>
std::string addresses_of(const Buffers&... buffers) {
  std::string bytes;
  const auto append = [&](const void* p) { bytes.append(reinterpret_cast<const char*>(&p), sizeof p); };
  (append(buffers.data()), ...);
  return bytes;
}

// Instantiated CUDA graphs and what each was captured for: two, because a fit replays
// one of graph_steps steps and captures another for the rest of its epochs
// (cuda/train.hpp). A third capture replaces the one launched or held less recently.
// Copies start empty: a graph holds the pointers of the state that captured it.
class graph_cache {
 public:
  struct key_type {
    const void* x;
    const void* y;
    std::size_t batch, steps;
    std::string settings;   // the bytes of the loss, optimizer, model and settings, baked into the kernels
    std::string addresses;  // every buffer the graph reads or writes: a reallocated one (a
                            // train_step on a larger batch grows them) means a new capture
    bool operator==(const key_type&) const = default;
  };
  graph_cache() = default;
  graph_cache(const graph_cache&) {}
  graph_cache& operator=(const graph_cache& other) {  // empty, as a copy starts
    if (this != &other) reset();
    return *this;
  }
  ~graph_cache() { reset(); }

  bool holds(const key_type& k) const { return find(k) != nullptr; }
  void reset() {
    for (entry& e : entries_) e.release();
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
  cudaStream_t stream() {
    if (!stream_) TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return stream_;
  }
  // Makes the graph under k held and the more recent of the two: captured from what
  // `record(stream)` enqueues when it is not held yet, in place of the other. A fit
  // holds both its graphs this way before launching either, so that a failed capture
  // leaves the state as it was.
  template <class Record>
  void hold(const key_type& k, Record record) {
    if (const entry* e = find(k)) make_recent(*e);
    else capture(k, record);
  }
  // Launches the graph held under k (holds(k)), which becomes the more recent.
  void launch(const key_type& k) {
    const entry& e = *find(k);
    make_recent(e);
    TL_CUDA_CHECK(cudaGraphLaunch(e.exec, stream_));
  }

 private:
  struct entry {
    key_type key{};
    cudaGraphExec_t exec = nullptr;
    void release() {
      if (exec) cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
  };
  const entry* find(const key_type& k) const {
    for (const entry& e : entries_)
      if (e.exec && e.key == k) return &e;
    return nullptr;
  }
  void make_recent(const entry& e) { older_ = &e == &entries_[0] ? 1 : 0; }
  // Captures what `record(stream)` enqueues, instantiates it and keeps it under `k`, in
  // place of the older graph.
  template <class Record>
  void capture(const key_type& k, Record record) {
    entry& slot = entries_[older_];
    slot.release();
    cudaGraph_t graph;
    TL_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    try {
      record(stream_);
    } catch (...) {  // end the capture, or every later call on the stream fails too
      if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess) cudaGraphDestroy(graph);
      throw;
    }
    TL_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t status = cudaGraphInstantiate(&slot.exec, graph, 0);
    cudaGraphDestroy(graph);
    if (status != cudaSuccess) slot.exec = nullptr;
    TL_CUDA_CHECK(status);
    slot.key = k;
    make_recent(slot);
  }

  entry entries_[2];
  std::size_t older_ = 0;
  cudaStream_t stream_ = nullptr;
};
}  // namespace detail

}  // namespace tl
