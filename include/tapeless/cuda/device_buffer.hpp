// Device memory as tapeless holds it: tl::device_buffer<T>, an owning, contiguous,
// typed allocation in GPU memory (a training state's parameters, a device batch's
// values, every workspace).
//
// Why not thrust::device_vector, which it replaced: Thrust's headers and kernels took
// about a quarter of every nvcc build of a model (the seed fit's 15.8 s → 12.2 s on the
// 2-core machine: the A/B is in docs/design.md), for an allocation, copies and a fill.
// Here those are the CUDA runtime's calls, and a failure is a tl::cuda_error that
// names the call, as everywhere else in the library.
//
// Copies take host or device pointers alike: the other side's kind is asked of the
// runtime (cudaPointerGetAttributes) and named in the copy, as thrust named it.
// Every call that writes the buffer returns once the default stream has done it, as
// thrust's did: the library's own streams are non-blocking, and a kernel on one of
// them must never see a half-written buffer. New elements are T{} (0 for every
// arithmetic type), written by a kernel, as thrust::device_vector's were.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"

namespace tl {
namespace detail {
template <class T>
__global__ void fill_kernel(T* out, std::size_t count, T value) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = value;
}
}  // namespace detail

template <class T>
class device_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "tl::device_buffer holds values copied byte for byte");

 public:
  using value_type = T;

  device_buffer() = default;
  // `count` zeros.
  explicit device_buffer(std::size_t count) : device_buffer(allocate(count)) { zero(0, count); }
  device_buffer(std::size_t count, const T& value) : device_buffer(allocate(count)) { fill(value); }
  // A copy of [first, first + count) from host or device memory.
  device_buffer(const T* first, std::size_t count) : device_buffer(allocate(count)) {
    copy(data_, first, count, into_buffer);
  }
  explicit device_buffer(std::span<const T> from) : device_buffer(from.data(), from.size()) {}
  // thrust::device_vector's (first, last): a newcomer's first try, which otherwise
  // listed every constructor.
  template <class Iterator>
    requires(!std::is_arithmetic_v<Iterator>)
  device_buffer(Iterator, Iterator) {
    static_assert(sizeof(Iterator) == 0, "tapeless: device_buffer takes (pointer, count), not (first, last): "
                                         "tl::device_buffer<T>(v.data(), v.size()), or (v) for a std::vector or span");
  }
  explicit device_buffer(const std::vector<T>& from) : device_buffer(from.data(), from.size()) {}

  device_buffer(const device_buffer& other) : device_buffer(other.data_, other.size_) {}
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  // Within the capacity, in place (the memory keeps its address, as a device_scalar or
  // a captured graph may hold it); past it, the copy is made before this buffer's
  // memory is given back, so a failed allocation leaves it as it was.
  device_buffer& operator=(const device_buffer& other) {
    if (this == &other) return *this;
    if (other.size_ <= capacity_) {
      copy(data_, other.data_, other.size_, within_device);
      size_ = other.size_;
    } else {
      device_buffer(other).swap(*this);
    }
    return *this;
  }
  device_buffer& operator=(device_buffer&& other) noexcept {
    device_buffer(std::move(other)).swap(*this);
    return *this;
  }
  ~device_buffer() {
    if (data_) (void)cudaFree(data_);  // (a destructor cannot throw; a failed free leaks)
  }
  void swap(device_buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  std::size_t size() const { return size_; }
  // The most values the memory holds without another allocation.
  std::size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }

  // `count` values: the first min(size(), count) kept, any new ones zero. Within the
  // capacity nothing is allocated and the memory keeps its address (a mini-batch loop
  // whose last batch is smaller shrinks and grows back every epoch: thrust's
  // device_vector kept its capacity too); past it, the old memory is given back only
  // once the new is allocated and filled.
  void resize(std::size_t count) {
    if (count <= capacity_) {
      if (count > size_) zero(size_, count);
      size_ = count;
      return;
    }
    device_buffer larger(allocate(count));
    copy(larger.data_, data_, size_, within_device);
    larger.zero(size_, count);
    larger.swap(*this);
  }
  // These values become [first, first + count) of host or device memory (in place
  // within the capacity). `first` must not point into this buffer past data() (the
  // copy's ranges would overlap, as for std::vector::assign).
  void assign(const T* first, std::size_t count) {
    if (count <= capacity_) {
      copy(data_, first, count, into_buffer);
      size_ = count;
      return;
    }
    device_buffer(first, count).swap(*this);
  }
  void assign(std::span<const T> from) { assign(from.data(), from.size()); }
  // Every value set to `value`.
  void fill(const T& value) {
    if (size_ != 0) fill_range(data_, size_, value);
  }

  // Values [first, first + count) into host or device memory at `out`.
  void copy_to(T* out, std::size_t first, std::size_t count) const {
    if (first > size_ || count > size_ - first)
      throw std::out_of_range("tapeless::device_buffer::copy_to: values [" + std::to_string(first) + ", " +
                              std::to_string(first + count) + ") of " + std::to_string(size_));
    copy(out, data_ + first, count, out_of_buffer);
  }
  void copy_to(T* out) const { copy(out, data_, size_, out_of_buffer); }
  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    copy_to(out.data());
    return out;
  }
  // One value, read or written through the host (each call synchronizes).
  T get(std::size_t i) const {
    T value;
    copy_to(&value, i, 1);
    return value;
  }
  void set(std::size_t i, const T& value) {
    if (i >= size_)
      throw std::out_of_range("tapeless::device_buffer::set: value " + std::to_string(i) + " of " +
                              std::to_string(size_));
    copy(data_ + i, &value, 1, from_host);
  }

 private:
  // New memory for `count` values, owned by whoever takes it: a type of its own, so that
  // no T* can mean it (a resize that passed the raw pointer took the copying
  // constructor, allocated twice and leaked the first: found in review, 2026-12-07).
  struct allocation {
    T* memory;
    std::size_t count;
  };
  explicit device_buffer(allocation a) noexcept : data_(a.memory), size_(a.count), capacity_(a.count) {}

  static allocation allocate(std::size_t count) {
    if (count == 0) return {nullptr, 0};
    if (count > std::size_t(-1) / sizeof(T))
      throw cuda_error(cudaErrorMemoryAllocation,
                       "tapeless::device_buffer: " + std::to_string(count) + " values do not fit a size_t of bytes");
    void* memory = nullptr;
    if (const cudaError_t status = cudaMalloc(&memory, count * sizeof(T)); status != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky: clear it for the next call
      const bool no_device = detail::no_usable_device(status);
      throw cuda_error(status, std::string("tapeless::device_buffer: ") +
                                   (no_device ? "no CUDA device is usable here (" : "cudaMalloc of " +
                                                    std::to_string(count * sizeof(T)) + " bytes failed (") +
                                   cudaGetErrorName(status) + ": " + cudaGetErrorString(status) + ")");
    }
    return {static_cast<T*>(memory), count};
  }
  static bool on_device(const void* p) {
    cudaPointerAttributes attributes{};
    TL_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  }
  // Which side is this buffer's; the other may be host or device memory.
  enum direction { into_buffer, out_of_buffer, within_device, from_host };
  static void copy(T* to, const T* from, std::size_t count, direction d) {
    if (count == 0 || to == from) return;
    const cudaMemcpyKind kind = d == within_device ? cudaMemcpyDeviceToDevice
                                : d == from_host   ? cudaMemcpyHostToDevice
                                : d == into_buffer ? (on_device(from) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                                   : (on_device(to) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost);
    TL_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(T), kind, 0));
    TL_CUDA_CHECK(cudaStreamSynchronize(0));
  }
  // By the fill kernel, as thrust::device_vector zeroed.
  void zero(std::size_t first, std::size_t last) {
    if (last <= first) return;
    fill_range(data_ + first, last - first, T{});
  }
  static void fill_range(T* out, std::size_t count, const T& value) {
    detail::fill_kernel<<<detail::gpu::grid_stride_blocks(count), 256>>>(out, count, value);
    TL_CUDA_CHECK_LAUNCH("tl::detail::fill_kernel");
    TL_CUDA_CHECK(cudaStreamSynchronize(0));
  }

  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace tl
