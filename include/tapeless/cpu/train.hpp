// Training in the shape Lux users know, on the CPU: train_step for one full-batch
// step, fit for many (train/state.hpp holds the state they advance).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tapeless/core/finite.hpp"
#include "tapeless/cpu/batch.hpp"
#include "tapeless/train/progress.hpp"

namespace tl {

namespace detail {
// Why a step failed, for its message: where a batch holds a non-finite value, as
// " (x holds NaN at feature 0 of sample 7)", else where the parameters already hold one
// (an earlier update wrote it); empty when neither does. Looked for only once a step
// has failed: the data are the usual cause, and a message that names them saves a search.
template <class T>
std::string non_finite_cause(const basic_matrix<T>& x, const basic_matrix<T>& y, std::span<const T> params,
                             bool initial) {
  for (const auto* m : {&x, &y}) {
    if (const auto i = first_non_finite<T>(m->values()))
      return non_finite_sample(m == &x ? "x" : "y", double(m->values()[*i]), *i, m->features());
  }
  if (const auto i = first_non_finite<T>(params)) return non_finite_parameter(double(params[*i]), *i, initial);
  return {};
}
// `step` is the state's count of steps taken, so the message's "step N" is the state's
// N-th, which for a fit that continues an earlier one is not its own N-th.
[[noreturn]] inline void throw_non_finite(const char* where, const char* what, long step, double value,
                                          const std::string& cause = {}) {
  throw numeric_error("tapeless::" + std::string(where) + ": the " + std::string(what) + " is " +
                      (std::isnan(value) ? "NaN" : "infinite") + " at step " + std::to_string(step + 1) + cause +
                      "; the parameters were left as before that step");
}
// The first non-finite value of `values` (0 if none), for the message.
template <class T, std::size_t N>
double first_non_finite_value(std::span<const T, N> values) {
  const auto at = first_non_finite<T>(values);
  return at ? double(values[*at]) : 0.0;
}
}  // namespace detail

namespace detail {
// One full-batch step; errors name `where`, the user's call (train_step or fit).
template <model Model, class Optimizer, class T, class Loss>
T step(const char* where, train_state<Model, Optimizer, T>& state, const Loss& loss, const basic_matrix<T>& x,
       const basic_matrix<T>& y) {
  if constexpr (!check_loss<Loss>()) {
    return T(0);
  } else {
    check_batch<Model>(where, x, &y);
    check_settings(state.optimizer);
    const auto [value, gradient_finite] = fused_loss_and_gradient(state.model, loss, state.params.data(), x.data(),
                                                                  y.data(), x.batch(), state.gradient.data());
    const auto cause = [&] {
      return non_finite_cause(x, y, std::span<const T>(std::as_const(state.params).flat()), state.step == 0);
    };
    if (!std::isfinite(value)) throw_non_finite(where, "loss", state.step, value, cause());
    if (!gradient_finite)
      throw_non_finite(where, "gradient", state.step, first_non_finite_value(std::as_const(state.gradient).flat()),
                       cause());
    // The update, split over threads for large models in whole blocks of the
    // parameters optimizer_update_range takes at once, so that no parameter's rounding
    // depends on the thread count.
    constexpr std::size_t P = Model::parameter_count, block = optimizer_lanes;
    T* params = state.params.data();
    const T* grad = state.gradient.data();
    T* slots = state.optimizer_state.data();
    const std::size_t parts = cpu_threads_for_values(P);
    for_each_part((P + block - 1) / block, parts, [&](std::size_t, std::size_t first, std::size_t last) {
      optimizer_update_range(state.optimizer, state.step + 1, params, grad, slots, first * block,
                             std::min(last * block, P), P);
    });
    ++state.step;
    return value;
  }
}
}  // namespace detail

// One full-batch step: loss and gradient in one fused pass, then the optimizer.
// Returns the loss before the update. A non-finite loss or gradient (an Inf in the
// data can give a finite loss and a NaN gradient) throws and changes nothing.
template <model Model, class Optimizer, class T, class Loss>
T train_step(train_state<Model, Optimizer, T>& state, const Loss& loss, const basic_matrix<T>& x,
             const basic_matrix<T>& y) {
  return detail::step("train_step", state, loss, x, y);
}

template <model Model, class Optimizer, class T, class Loss, class U, class V>
  requires(!detail::same_precision<T, U, V>)
T train_step(train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&, const basic_matrix<V>&) {
  (void)detail::check_same_precision<T, U, V>();
  return {};
}

// `epochs` full-batch steps. If one fails, the numeric_error it throws carries the
// losses of the steps before it (the state holds their result).
template <model Model, class Optimizer, class T, class Loss>
fit_result fit(train_state<Model, Optimizer, T>& state, const Loss& loss, const basic_matrix<T>& x,
               const basic_matrix<T>& y, std::size_t epochs, const fit_options& options = {}) {
  detail::check_epochs("fit", epochs);
  fit_result result;
  result.loss_history.reserve(epochs);
  detail::progress_printer progress(epochs, options.log_every, options.progress);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
    try {
      result.loss_history.push_back(detail::step("fit", state, loss, x, y));
    } catch (const numeric_error& e) {
      throw numeric_error(e.what(), std::move(result.loss_history));
    }
    progress.update(epoch + 1, float(result.loss_history.back()));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}
template <model Model, class Optimizer, class T, class Loss, class U, class V>
  requires(!detail::same_precision<T, U, V>)
fit_result fit(train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&, const basic_matrix<V>&,
               std::size_t, const fit_options& = {}) {
  (void)detail::check_same_precision<T, U, V>();
  return {};
}

}  // namespace tl
