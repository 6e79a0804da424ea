// A second stream for work off a step's critical path: forked from the main stream
// where that work's inputs are ready, joined back where its results are needed. Inside
// a graph capture the fork makes it part of the capture and the join must come before
// the capture ends; outside one, the same calls order plain streams.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tapeless/cuda/errors.hpp"

namespace tl::detail::gpu {

class side_stream {
 public:
  side_stream() = default;
  side_stream(const side_stream&) {}  // copies start empty: a stream belongs to one owner
  side_stream& operator=(const side_stream&) { return *this; }
  ~side_stream() { reset(); }

  // Creates the stream and its events; outside any capture (layered_workspace::prepare).
  void prepare() {
    if (stream_) return;
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaError_t status = cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming);
    if (status == cudaSuccess) status = cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming);
    if (status != cudaSuccess) {
      reset();
      throw cuda_error(status, std::string("tapeless: cudaEventCreate failed for the layered path's second stream: ") +
                                   cudaGetErrorString(status));
    }
  }
  bool ready() const { return stream_ != nullptr; }

  // The side stream, after everything enqueued on `main` so far.
  cudaStream_t fork(cudaStream_t main) {
    TL_CUDA_CHECK(cudaEventRecord(forked_, main));
    TL_CUDA_CHECK(cudaStreamWaitEvent(stream_, forked_, 0));
    return stream_;
  }
  // What `main` enqueues next runs after everything enqueued on the side stream so far.
  void join(cudaStream_t main) {
    TL_CUDA_CHECK(cudaEventRecord(joined_, stream_));
    TL_CUDA_CHECK(cudaStreamWaitEvent(main, joined_, 0));
  }
  // join() for an error path: throws nothing, so the error being reported stays the
  // one that is thrown. A capture then ends with the side stream joined, and work
  // enqueued after it on `main` cannot overlap what the side stream still runs.
  void join_after_error(cudaStream_t main) noexcept {
    if (cudaEventRecord(joined_, stream_) == cudaSuccess) cudaStreamWaitEvent(main, joined_, 0);
  }

 private:
  void reset() {
    if (forked_) cudaEventDestroy(forked_);
    if (joined_) cudaEventDestroy(joined_);
    if (stream_) cudaStreamDestroy(stream_);
    forked_ = joined_ = nullptr;
    stream_ = nullptr;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, joined_ = nullptr;
};

}  // namespace tl::detail::gpu
