// A device_buffer built from a std::vector's begin() and end(), as a
// thrust::device_vector is: one static_assert naming (pointer, count) (it was every
// constructor's signature, 3.2 KB).
#include <vector>

#include "tapeless/cuda.hpp"

int main() {
  const std::vector<float> host(16, 1.0f);
  const tl::device_buffer<float> on_device(host.begin(), host.end());
  return on_device.size() == 16 ? 0 : 1;
}
