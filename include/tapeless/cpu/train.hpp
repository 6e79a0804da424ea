// Training in the shape Lux users know: a train_state holding the model, parameters
// and optimizer state; train_step for one full-batch step; fit for many.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "tapeless/cpu/batch.hpp"
#include "tapeless/cpu/progress.hpp"
#include "tapeless/nn/optimizers.hpp"

namespace tl {

template <model Model, class Optimizer>
struct train_state {
  Model model;
  parameters<Model> params;
  Optimizer optimizer;
  std::vector<float> optimizer_state = std::vector<float>(Optimizer::state_slots * Model::parameter_count, 0.0f);
  long step = 0;  // optimizer steps taken so far
  // Workspace reused by every step (no allocation in the loop).
  parameters<Model> gradient{};
  detail::cpu_workspace workspace;

  train_state(Model m, parameters<Model> p, Optimizer opt) : model(m), params(std::move(p)), optimizer(opt) {}
};

struct fit_options {
  bool progress = true;      // report on stderr (bar on a terminal, lines otherwise)
  std::size_t log_every = 0;  // epochs between plain lines; 0 = a tenth of the run
};

struct fit_result {
  std::vector<float> loss_history;  // loss before each epoch's update
  double seconds = 0.0;             // wall time of the training loop
};

namespace detail {
[[noreturn]] inline void throw_non_finite(long step, float loss) {
  throw numeric_error("tapeless::train_step: the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite") +
                      " at step " + std::to_string(step + 1) + "; the parameters were left as before that step");
}
}  // namespace detail

// One full-batch step: loss and gradient in one fused pass, then the optimizer.
// Returns the loss before the update. A non-finite loss throws and changes nothing.
template <model Model, class Optimizer, class Loss>
float train_step(train_state<Model, Optimizer>& state, const Loss& loss, const matrix& x, const matrix& y) {
  detail::check_batch<Model>("train_step", x, &y);
  const float value = detail::fused_loss_and_gradient(state.model, loss, state.params.data(), x.data(), y.data(),
                                                      x.batch(), state.gradient.data(), state.workspace);
  if (!std::isfinite(value)) detail::throw_non_finite(state.step, value);
  detail::optimizer_step(state.optimizer, state.step + 1, state.params.data(), state.gradient.data(),
                         state.optimizer_state.data(), Model::parameter_count);
  ++state.step;
  return value;
}

template <model Model, class Optimizer, class Loss>
fit_result fit(train_state<Model, Optimizer>& state, const Loss& loss, const matrix& x, const matrix& y,
               std::size_t epochs, const fit_options& options = {}) {
  fit_result result;
  result.loss_history.reserve(epochs);
  detail::progress_printer progress(epochs, options.log_every, options.progress);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
    result.loss_history.push_back(train_step(state, loss, x, y));
    progress.update(epoch + 1, result.loss_history.back());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tl
