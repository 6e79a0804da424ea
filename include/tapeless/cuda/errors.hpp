// Every CUDA runtime call and launch is checked: a failure throws tl::cuda_error
// naming the call, the file and line, and CUDA's message.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace tl {

struct cuda_error : std::runtime_error {
  cudaError_t code;
  cuda_error(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
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
