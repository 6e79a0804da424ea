// A loss without its gradient, on the CPU: a validation loss (PyTorch's
// `with torch.no_grad(): loss_fn(model(x), y)`), a third of a training step's work.
#pragma once

#include <vector>

#include "tapeless/cpu/batch.hpp"
#include "tapeless/nn/losses.hpp"
#include "tapeless/train/state.hpp"

namespace tl {

// The mean loss of the model's outputs on x against y, as value_and_grad and a
// training step define it (the same denominator); equal to their loss up to the
// rounding of the sums, whose order differs. Non-finite values are returned as they are.
template <class Loss, model Model, class T>
T evaluate_loss(const Loss& loss, const Model& model, const parameters<Model, T>& params, const basic_matrix<T>& x,
                const basic_matrix<T>& y) {
  if constexpr (check_loss<Loss>()) {
    detail::check_batch<Model>("evaluate_loss", x, &y);
    constexpr std::size_t Out = Model::outputs;
    const basic_matrix<T> yhat = apply(model, params, x);
    std::vector<T> scratch(Out);
    double total = 0.0;
    for (std::size_t s = 0; s < x.batch(); ++s)
      total += double(detail::loss_of_sample<Out>(loss, yhat.data() + s * Out, y.data() + s * Out, scratch.data()));
    return T(total / Loss::denominator(Out, x.batch()));
  }
  return T(0);
}
template <class Loss, model Model, class T, class U, class V>
  requires(!detail::same_precision<T, U, V>)
T evaluate_loss(const Loss&, const Model&, const parameters<Model, T>&, const basic_matrix<U>&,
                const basic_matrix<V>&) {
  (void)detail::check_same_precision<T, U, V>();
  return {};
}
// A training state's model and parameters (as the GPU's overload takes a cuda_train_state).
template <class Loss, model Model, class Optimizer, class T>
T evaluate_loss(const Loss& loss, const train_state<Model, Optimizer, T>& state, const basic_matrix<T>& x,
                const basic_matrix<T>& y) {
  return evaluate_loss(loss, state.model, state.params, x, y);
}

template <class Loss, model Model, class Optimizer, class T, class U, class V>
  requires(!detail::same_precision<T, U, V>)
T evaluate_loss(const Loss&, const train_state<Model, Optimizer, T>&, const basic_matrix<U>&, const basic_matrix<V>&) {
  (void)detail::check_same_precision<T, U, V>();
  return {};
}

}  // namespace tl
