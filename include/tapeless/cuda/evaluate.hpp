// A loss without its gradient, on the GPU (tl::evaluate_loss of cpu/evaluate.hpp for
// device batches): the model's forward (tl::apply), then each sample's loss summed in
// double by Thrust's transform_reduce; one host synchronization for the result.
#pragma once

#include <cstddef>
#include <string>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system_error.h>
#include <thrust/transform_reduce.h>

#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/train.hpp"
#include "tapeless/nn/losses.hpp"

namespace tl {
namespace detail::gpu {
template <std::size_t N, class Loss, class T>
struct loss_of_sample_at {
  Loss loss;
  const T* yhat;
  const T* y;
  __device__ double operator()(std::size_t s) const {
    T dyhat[N];
    return double(loss_of_sample<N>(loss, yhat + s * N, y + s * N, dyhat));
  }
};
}  // namespace detail::gpu

// The mean loss of the model's outputs on a device batch, as the device value_and_grad
// defines it (equal up to the rounding of the sums); parameters on the device.
template <class Loss, model Model, class T>
T evaluate_loss(const Loss& loss, const Model& model, const thrust::device_vector<T>& params,
                const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                gpu_regime regime = gpu_regime::automatic,
                std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  if constexpr (check_loss<Loss>()) {
    detail::check_batch<Model>("evaluate_loss", x, &y);
    constexpr std::size_t Out = Model::outputs;
    const basic_device_matrix<T> yhat = apply(model, params, x, regime, layered_chunk_bytes);
    const detail::gpu::loss_of_sample_at<Out, Loss, T> at{loss, yhat.data(), y.data()};
    double total = 0.0;
    try {
      total = thrust::transform_reduce(thrust::device, thrust::counting_iterator<std::size_t>(0),
                                       thrust::counting_iterator<std::size_t>(x.batch()), at, 0.0,
                                       thrust::plus<double>());
    } catch (const thrust::system_error& e) {  // tapeless reports CUDA failures as cuda_error
      throw cuda_error(cudaError_t(e.code().value()), std::string("tapeless::evaluate_loss: ") + e.what());
    }
    return T(total / Loss::denominator(Out, x.batch()));
  }
  return T(0);
}
// With host parameters (copied to the device first), or a training state's.
template <class Loss, model Model, class T>
T evaluate_loss(const Loss& loss, const Model& model, const parameters<Model, T>& params,
                const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                gpu_regime regime = gpu_regime::automatic,
                std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  const thrust::device_vector<T> on_device(params.data(), params.data() + Model::parameter_count);
  return evaluate_loss(loss, model, on_device, x, y, regime, layered_chunk_bytes);
}
template <class Loss, model Model, class Optimizer, class T>
T evaluate_loss(const Loss& loss, const cuda_train_state<Model, Optimizer, T>& s, const basic_device_matrix<T>& x,
                const basic_device_matrix<T>& y) {
  return evaluate_loss(loss, s.model, s.params, x, y, s.regime, s.layered_chunk_bytes);
}

}  // namespace tl
