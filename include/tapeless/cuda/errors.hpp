// Every CUDA runtime call and launch is checked: a failure throws tl::cuda_error
// naming the call, the file and line, and CUDA's message.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tl {

struct cuda_error : std::runtime_error {
  cudaError_t code;
  cuda_error(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
};

// Not enough free device memory for what was asked; thrown before anything is allocated.
struct device_memory_error : cuda_error {
  std::size_t needed, available;
  device_memory_error(std::size_t need, std::size_t have, const std::string& what)
      : cuda_error(cudaErrorMemoryAllocation, what), needed(need), available(have) {}
};

namespace detail {
inline void cuda_check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw cuda_error(status, std::string("tapeless: ") + call + " failed at " + file + ":" + std::to_string(line) +
                                 ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}
}  // namespace detail

}  // namespace tl

#define TL_CUDA_CHECK(call) ::tl::detail::cuda_check((call), #call, __FILE__, __LINE__)
// After a launch: configuration errors now, execution errors at the next synchronizing call.
#define TL_CUDA_CHECK_LAUNCH(name) ::tl::detail::cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)

namespace tl::detail {
// Whether a failed call's status means no GPU is usable at all (no device, no or an old
// driver), which the library reports as such rather than as the call's own failure.
inline bool no_usable_device(cudaError_t status) {
  return status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorInitializationError;
}

// Throws device_memory_error when `bytes` more than the device has free are asked for
// (`what` says for what), so that a model or batch too large fails before allocating.
inline void require_device_memory(const char* where, std::size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  std::size_t free_bytes = 0, total = 0;
  // Named after the caller: the first call a state makes on a machine without a usable
  // GPU (a missing driver) failed here, in a message that pointed into this header.
  if (const cudaError_t status = cudaMemGetInfo(&free_bytes, &total); status != cudaSuccess) {
    const bool no_device = no_usable_device(status);
    if (no_device) (void)cudaGetLastError();
    throw cuda_error(status, std::string("tapeless::") + where +
                                 (no_device ? ": no CUDA device is usable here (" : ": cudaMemGetInfo failed (") +
                                 cudaGetErrorName(status) + ": " + cudaGetErrorString(status) + ")");
  }
  if (bytes <= free_bytes) return;
  const auto gib = [](std::size_t b) { return std::to_string(double(b) / double(1ull << 30)).substr(0, 6) + " GiB"; };
  throw device_memory_error(bytes, free_bytes,
                            std::string("tapeless::") + where + ": " + what + " need " + gib(bytes) +
                                " of device memory, and " + gib(free_bytes) + " of " + gib(total) +
                                " are free; use a smaller batch or model");
}
}  // namespace tl::detail
