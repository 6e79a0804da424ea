// tl::least_squares on a CUDA device: the same solver (lsq/solver.hpp, on the host)
// and the same answer as on the CPU, with the normal equations of every iteration from
// one fused kernel over the device batch: each thread runs samples through the model's
// forward and backward passes (one lane; the backward pass with dout = 1 is the
// sample's Jacobian row) and keeps r^2, J^T r and the upper triangle of J^T J in
// registers; a block adds them up (warp reduce-scatter, as for gradients) and writes
// one column entry per sum; cub::DeviceSegmentedReduce adds the blocks' entries of
// each sum. Only the 1 + P + P(P+1)/2 sums cross to the host, once per iteration.
#pragma once

#include <cub/device/device_segmented_reduce.cuh>

#include <array>
#include <span>
#include <vector>

#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/train.hpp"
#include "tapeless/lsq/normal_equations.hpp"
#include "tapeless/lsq/solver.hpp"

namespace tl {

namespace detail::gpu {

// Block b's sums into sums_by_column[j * blocks + b]: sum j's entries are contiguous,
// the segments cub::DeviceSegmentedReduce adds.
template <class Model, class T>
__global__ void normal_equations_kernel(Model model, const T* p, const T* x, const T* y, const T* weights,
                                        std::size_t batch, bool jacobian, T* sums_by_column) {
  constexpr std::size_t P = Model::parameter_count, In = Model::inputs, Out = Model::outputs, N = lsq::packed_sums<P>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* scratch = reinterpret_cast<T*>(shared_bytes);
  T acc[N] = {};
  for (std::size_t s = blockIdx.x * blockDim.x + threadIdx.x; s < batch; s += std::size_t(gridDim.x) * blockDim.x) {
    const T w = weights ? weights[s] : T(1);
    for (std::size_t o = 0; o < Out; ++o) {
      group_buffers<Model, 1, T> buffers;  // backward may overwrite what forward saved: one forward per output
      const T* yhat = forward_group(model, p, x + s * In, buffers);
      const T r = w * (yhat[o] - y[s * Out + o]);
      acc[0] += r * r;
      if (jacobian) {
        T dout[Out] = {}, g[P] = {};
        dout[o] = w;
        backward_group(model, p, x + s * In, buffers, dout, g);
        for (std::size_t a = 0, u = 0; a < P; ++a) {
          acc[1 + a] += g[a] * r;
          for (std::size_t b = a; b < P; ++b, ++u) acc[1 + P + u] += g[a] * g[b];
        }
      }
    }
  }
  warp_sums_to_shared(acc, scratch);
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < N; j += blockDim.x) sums_by_column[j * gridDim.x + blockIdx.x] = warp_row_total<N>(scratch, j);
}

}  // namespace detail::gpu

namespace detail {
// The number of nonzero weights into *count (zero before the launch).
template <class T>
__global__ void count_nonzero_kernel(const T* weights, std::size_t n, unsigned long long* count) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    mine += weights[i] != T(0);
  if (mine != 0) atomicAdd(count, mine);
}

// Buffers reused by every iteration of one fit.
template <class T>
struct device_normal_equations {
  int blocks = 0;
  device_buffer<T> by_column, sums, params;
  device_buffer<int> offsets;
  device_buffer<unsigned char> temporary;
};
}  // namespace detail

// Fits the model's parameters to a device batch (x, y) by least squares, starting from
// `params` (host) and leaving the solution there; weights as on the CPU (device, one
// per sample, or empty).
template <model Model, class T>
lsq::result<Model::parameter_count> least_squares(const Model& model, parameters<Model, T>& params,
                                                  const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                                                  const lsq::options& options = {},
                                                  const device_buffer<T>& weights = {}) {
  constexpr std::size_t P = Model::parameter_count, N = lsq::packed_sums<P>;
  static_assert(N <= 256, "tapeless::least_squares on the GPU: at most 20 parameters (J^T J's sums in registers)");
  detail::check_batch<Model>("least_squares", x, &y);
  if (!weights.empty())
    detail::require_size("least_squares", "the number of weights (one per sample)", x.batch(), weights.size());
  constexpr int threads = 256;
  detail::device_normal_equations<T> buffers;
  buffers.blocks = static_cast<int>(std::min<std::size_t>((x.batch() + threads - 1) / threads, 2 * detail::multiprocessors()));
  buffers.by_column.resize(N * buffers.blocks);
  buffers.sums.resize(N);
  buffers.params.resize(P);
  std::vector<int> offsets(N + 1);
  for (std::size_t j = 0; j <= N; ++j) offsets[j] = int(j) * buffers.blocks;
  buffers.offsets.assign(offsets.data(), offsets.size());
  const int* first = buffers.offsets.data();
  std::size_t temporary_bytes = 0;
  TL_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, temporary_bytes, buffers.by_column.data(),
                                                buffers.sums.data(), int(N), first, first + 1));
  buffers.temporary.resize(temporary_bytes);
  std::size_t used = x.batch();
  if (!weights.empty()) {
    device_buffer<unsigned long long> nonzero(1);
    detail::count_nonzero_kernel<<<detail::gpu::grid_stride_blocks(weights.size()), threads>>>(
        weights.data(), weights.size(), nonzero.data());
    TL_CUDA_CHECK_LAUNCH("count_nonzero_kernel");
    used = std::size_t(nonzero.get(0));
  }

  auto evaluate = [&](const std::array<double, P>& at, lsq::normal_equations<P>& out, bool jacobian) {
    std::array<T, P> p;
    for (std::size_t j = 0; j < P; ++j) p[j] = static_cast<T>(at[j]);
    buffers.params.assign(p.data(), P);
    const std::size_t shared = (threads / detail::gpu::warp_size) * detail::gpu::padded_sums<N> * sizeof(T);
    detail::gpu::normal_equations_kernel<<<buffers.blocks, threads, shared>>>(
        model, buffers.params.data(), x.data(), y.data(), weights.empty() ? nullptr : weights.data(),
        x.batch(), jacobian, buffers.by_column.data());
    TL_CUDA_CHECK_LAUNCH("normal_equations_kernel");
    TL_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(buffers.temporary.data(), temporary_bytes,
                                                  buffers.by_column.data(), buffers.sums.data(), int(N),
                                                  first, first + 1));
    std::array<T, N> sums;
    buffers.sums.copy_to(sums.data());  // synchronizes
    out = lsq::unpack_normal_equations<P>([&](std::size_t i) { return sums[i]; }, used * Model::outputs);
  };
  std::array<double, P> start;
  for (std::size_t j = 0; j < P; ++j) start[j] = double(params.flat()[j]);
  const auto result = lsq::solve(evaluate, start, options);
  for (std::size_t j = 0; j < P; ++j) params.flat()[j] = static_cast<T>(result.parameters[j]);
  return result;
}

}  // namespace tl
