// The GPU state's common slips as one static_assert each, as train/wrong_calls.hpp
// gives them for the CPU's train_state: the loss before the state in train_step and
// fit (also with braced options, which no parameter pack deduces), and a state given to
// value_and_grad. nvcc listed 3.9-5.5 KB of candidates for them (a newcomer probe,
// 2026-12-07). No right call has a cuda_train_state second, so none binds here.
#pragma once

#include <cstddef>

#include "tapeless/cuda/train.hpp"

namespace tl {

template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
device_scalar<T> train_step(const Loss&, const cuda_train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step takes the state first: tl::train_step(gpu_state, loss, x, y)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
fit_result fit(const Loss&, const cuda_train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the state first: tl::fit(gpu_state, loss, x, y, epochs)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class U, class V>
  requires(!model<Loss>)
fit_result fit(const Loss&, const cuda_train_state<Model, Optimizer, T>&, const basic_device_matrix<U>&,
               const basic_device_matrix<V>&, std::size_t, const cuda_fit_options&) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the state first: tl::fit(gpu_state, loss, x, y, epochs)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
loss_and_gradient<Model, T> value_and_grad(const Loss&, const cuda_train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: value_and_grad takes a model and its host parameters, not a state: "
                                    "tl::value_and_grad(loss, gpu_state.model, gpu_state.host_params(), x, y)");
  return {};
}

}  // namespace tl
