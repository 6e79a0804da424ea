// Devices in the shape Lux users know: cpu_device(), cuda_device(i), default_device(),
// and moving batches between them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/nn/matrix.hpp"

namespace tl {

struct device {
  enum class kind { cpu, cuda } type = kind::cpu;
  int index = 0;
  bool is_cuda() const { return type == kind::cuda; }
  std::string name() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }
};

inline int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return count;
}

// Why no CUDA device is usable, in CUDA's words (no driver, a driver older than the
// runtime, no device, ...), or "" when one is.
inline std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (status != cudaSuccess) return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  return count == 0 ? "the CUDA runtime reports no device" : "";
}

inline device cpu_device() { return {}; }

namespace detail {
// The number of devices; where none is usable, a cuda_error with CUDA's reason before
// anything else (an allocation would fail first, in words about memory).
inline int require_cuda_device(const std::string& where) {
  const int count = cuda_device_count();
  if (count == 0)
    throw cuda_error(cudaErrorNoDevice,
                     "tapeless::" + where + ": no CUDA device is usable here (" + cuda_unavailable_reason() + ")");
  return count;
}
}  // namespace detail

// Throws tl::cuda_error when the device does not exist.
inline device cuda_device(int index = 0) {
  const std::string where = "cuda_device(" + std::to_string(index) + ")";
  const int count = detail::require_cuda_device(where);
  if (index < 0 || index >= count)
    throw cuda_error(cudaErrorInvalidDevice, "tapeless::" + where + ": " + std::to_string(count) + " CUDA device(s) present");
  TL_CUDA_CHECK(cudaSetDevice(index));
  return {device::kind::cuda, index};
}

// The GPU when one is usable, else the CPU.
inline device default_device() { return cuda_device_count() > 0 ? cuda_device(0) : cpu_device(); }

// Sample indices held on the device, uploaded once and cut from many times: an
// epoch's shuffled order (`tl::device_indices order(gen.permutation(n))`), from which
// each step's mini-batch is `x.samples_into(xb, order, first, count)`. The largest is
// found on the host at upload, so a cut checks its indices without reading the device;
// the values are read-only for that reason.
class device_indices {
 public:
  device_indices() = default;
  explicit device_indices(std::span<const std::size_t> host)
      : values_(host), largest_(host.empty() ? 0 : *std::max_element(host.begin(), host.end())) {}
  std::size_t size() const { return values_.size(); }
  const device_buffer<std::size_t>& values() const { return values_; }
  // Whether every index names one of `samples` samples.
  bool all_below(std::size_t samples) const { return values_.empty() || largest_ < samples; }
  std::size_t largest() const { return largest_; }  // 0 when empty

 private:
  device_buffer<std::size_t> values_;
  std::size_t largest_ = 0;
};

// A batch in GPU memory, same layout as tl::basic_matrix: (features, batch),
// sample-major. tl::device_matrix holds floats.
template <class T>
struct basic_device_matrix {
  using value_type = T;
  std::size_t rows = 0, sample_count = 0;
  device_buffer<T> values;
  std::size_t features() const { return rows; }
  std::size_t batch() const { return sample_count; }
  const T* data() const { return values.data(); }
  T* data() { return values.data(); }
  // Mini-batches, as tl::basic_matrix::samples: samples [first, first + count), or the
  // samples at the host's `indices` in their order, copied on the device. Each call
  // allocates its result and uploads the indices (about 40 µs: docs/performance.md).
  basic_device_matrix samples(std::size_t first, std::size_t count) const;
  basic_device_matrix samples(std::span<const std::size_t> indices) const;
  // The samples at indices[first, first + count) into `out`, reusing its memory (no
  // allocation once it has held as many values) and without waiting for the GPU: the
  // mini-batch loop's cut. Throws shape_error when the range is outside `indices` or
  // an index is not a sample of this matrix, std::invalid_argument when `out` is this
  // matrix, and `out` is unchanged then; a CUDA failure is a cuda_error, after which
  // `out` holds the new shape and unspecified values. Enqueued on the default stream,
  // as train_step, apply and evaluate_loss are (fit waits for it: docs/api.md).
  void samples_into(basic_device_matrix& out, const device_indices& indices, std::size_t first,
                    std::size_t count) const;
};

namespace detail {
// Value i of a gathered mini-batch comes from sample indices[i / features].
struct gathered_value_index {
  const std::size_t* indices;
  std::size_t features;
  __host__ __device__ std::size_t operator()(std::size_t i) const {
    return indices[i / features] * features + i % features;
  }
};
// The mini-batch cut as one plain launch. Why not thrust::gather (which it replaced):
// a mini-batch loop cuts twice a step, and thrust's dispatch adds host time to each
// call (the A/B: docs/design.md; bench/gpu/seed_fit_gpu's minibatch256 rows).
template <class T>
__global__ void gather_samples_kernel(T* out, const T* in, gathered_value_index from, std::size_t values) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < values; i += stride)
    out[i] = in[from(i)];
}
}  // namespace detail

template <class T>
basic_device_matrix<T> basic_device_matrix<T>::samples(std::size_t first, std::size_t count) const {
  detail::check_sample_range("device_matrix::samples", first, count, sample_count);
  return {rows, count, device_buffer<T>(data() + first * rows, rows * count)};
}
template <class T>
basic_device_matrix<T> basic_device_matrix<T>::samples(std::span<const std::size_t> indices) const {
  detail::check_sample_indices("device_matrix::samples", indices, sample_count);
  basic_device_matrix out{rows, 0, {}};
  if (indices.empty()) return out;
  samples_into(out, device_indices(indices), 0, indices.size());
  return out;
}
template <class T>
void basic_device_matrix<T>::samples_into(basic_device_matrix& out, const device_indices& indices, std::size_t first,
                                          std::size_t count) const {
  if (&out == this) throw std::invalid_argument("tapeless::device_matrix::samples_into: `out` is the matrix cut from");
  detail::check_sample_range("device_matrix::samples_into", first, count, indices.size(), "indices",
                             "the device indices, which number");
  if (!indices.all_below(sample_count))
    throw shape_error("tapeless::device_matrix::samples_into: the device indices hold sample " +
                      std::to_string(indices.largest()) + ", the matrix has " + std::to_string(sample_count) +
                      " samples");
  out.values.resize(rows * count);  // first, so that a failed allocation leaves out's shape as it was
  out.rows = rows;
  out.sample_count = count;
  const std::size_t n = rows * count;
  if (n == 0) return;  // (no samples, or no features: a launch of 0 blocks is an error)
  detail::gather_samples_kernel<<<detail::gpu::grid_stride_blocks(n), 256>>>(
      out.data(), data(), detail::gathered_value_index{indices.values().data() + first, rows},
      n);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw cuda_error(status, std::string("tapeless::device_matrix::samples_into: ") + cudaGetErrorString(status));
}
using device_matrix = basic_device_matrix<float>;

template <class T>
basic_device_matrix<T> to_device(const basic_matrix<T>& m) {
  detail::require_cuda_device("to_device");
  basic_device_matrix<T> d{m.features(), m.batch(), {}};
  d.values.assign(m.data(), m.size());
  return d;
}
// `x | tl::cuda_device()` moves a batch to the GPU; `d | tl::cpu_device()` back.
template <class T>
basic_device_matrix<T> operator|(const basic_matrix<T>& m, const device& dev) {
  if (!dev.is_cuda()) throw shape_error("tapeless: a host matrix | " + dev.name() + ": use a CUDA device");
  return to_device(m);
}
template <class T>
basic_matrix<T> to_host(const basic_device_matrix<T>& d) {
  basic_matrix<T> m(d.features(), d.batch());
  d.values.copy_to(m.data());
  return m;
}
template <class T>
basic_matrix<T> operator|(const basic_device_matrix<T>& d, const device& dev) {
  if (dev.is_cuda()) throw shape_error("tapeless: a device matrix | " + dev.name() + ": use tl::cpu_device()");
  return to_host(d);
}

}  // namespace tl
