// A loss without its gradient, on the GPU (tl::evaluate_loss of cpu/evaluate.hpp for
// device batches): the model's forward (tl::apply), then each sample's loss summed in
// double by cub::DeviceReduce; one host synchronization for the result.
#pragma once

#include <cstddef>
#include <string>

#include <cub/device/device_reduce.cuh>

#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/train.hpp"
#include "tapeless/nn/losses.hpp"

namespace tl {
namespace detail::gpu {
template <std::size_t N, class Loss, class T>
__global__ void sample_losses_kernel(Loss loss, const T* yhat, const T* y, std::size_t batch, double* losses) {
  for (std::size_t s = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; s < batch;
       s += std::size_t(gridDim.x) * blockDim.x) {
    T dyhat[N];
    losses[s] = double(loss_of_sample<N>(loss, yhat + s * N, y + s * N, dyhat));
  }
}
}  // namespace detail::gpu

// The mean loss of the model's outputs on a device batch, as the device value_and_grad
// defines it (equal up to the rounding of the sums); parameters on the device.
template <class Loss, model Model, class T>
T evaluate_loss(const Loss& loss, const Model& model, const device_buffer<T>& params,
                const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                gpu_regime regime = gpu_regime::automatic,
                std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  if constexpr (check_loss<Loss>()) {
    detail::check_batch<Model>("evaluate_loss", x, &y);
    constexpr std::size_t Out = Model::outputs;
    const basic_device_matrix<T> yhat = apply(model, params, x, regime, layered_chunk_bytes);
    if (x.batch() == 0) return T(0.0 / Loss::denominator(Out, 0));  // (cub's reduction wants samples)
    // Each sample's loss in double, then their sum: cub sums a device array, and
    // the per-sample values keep the loss's own code (loss_of_sample) in one place.
    device_buffer<double> losses(x.batch()), total(1);
    detail::gpu::sample_losses_kernel<Out><<<detail::gpu::grid_stride_blocks(x.batch()), 256>>>(
        loss, yhat.data(), y.data(), x.batch(), losses.data());
    TL_CUDA_CHECK_LAUNCH("sample_losses_kernel");
    std::size_t bytes = 0;
    TL_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, losses.data(), total.data(), x.batch()));
    device_buffer<unsigned char> temporary(bytes);
    TL_CUDA_CHECK(cub::DeviceReduce::Sum(temporary.data(), bytes, losses.data(), total.data(), x.batch()));
    return T(total.get(0) / Loss::denominator(Out, x.batch()));
  }
  return T(0);
}
// With host parameters (copied to the device first), or a training state's.
template <class Loss, model Model, class T>
T evaluate_loss(const Loss& loss, const Model& model, const parameters<Model, T>& params,
                const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                gpu_regime regime = gpu_regime::automatic,
                std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  const device_buffer<T> on_device(params.data(), Model::parameter_count);
  return evaluate_loss(loss, model, on_device, x, y, regime, layered_chunk_bytes);
}
template <class Loss, model Model, class Optimizer, class T>
T evaluate_loss(const Loss& loss, const cuda_train_state<Model, Optimizer, T>& s, const basic_device_matrix<T>& x,
                const basic_device_matrix<T>& y) {
  return evaluate_loss(loss, s.model, s.params, x, y, s.regime, s.layered_chunk_bytes);
}

}  // namespace tl
