// What training holds and returns, shared by the CPU and CUDA backends: the
// training state (model, parameters, optimizer state, step), fit's options and
// result, and the batch checks every entry point runs first.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tapeless/core/errors.hpp"
#include "tapeless/nn/losses.hpp"
#include "tapeless/nn/optimizers.hpp"
#include "tapeless/nn/parameters.hpp"

namespace tl {

template <class O>
constexpr bool check_optimizer() {
  static_assert(optimizer<O>,
                "tapeless: this is not an optimizer: an optimizer declares state_slots, at_step<T>(step) and "
                "update(constants, p, g, state...) (tapeless/nn/optimizers.hpp)");
  return optimizer<O>;
}

namespace detail {
template <class O>
constexpr std::size_t state_slots_of() {
  if constexpr (optimizer<O>) return O::state_slots;
  else return 0;  // not an optimizer: check_optimizer has said so
}
}  // namespace detail

template <model Model, class Optimizer, class T = float>
struct train_state {
  static constexpr bool valid_optimizer = check_optimizer<Optimizer>();
  static_assert(valid_optimizer || true);  // forces the check, which reports itself
  using model_type = Model;
  using value_type = T;
  Model model;
  parameters<Model, T> params;
  Optimizer optimizer;
  std::vector<T> optimizer_state = std::vector<T>(detail::state_slots_of<Optimizer>() * Model::parameter_count, T(0));
  long step = 0;  // optimizer steps taken so far
  parameters<Model, T> gradient{};  // reused by every step: no allocation in the loop

  train_state(Model m, parameters<Model, T> p, Optimizer opt) : model(m), params(std::move(p)), optimizer(opt) {}
};
template <class Model, class Optimizer, class T>
train_state(Model, parameters<Model, T>, Optimizer) -> train_state<Model, Optimizer, T>;

template <model Model, class T = float>
struct loss_and_gradient {
  T loss;
  parameters<Model, T> gradient;
};

struct fit_options {
  bool progress = true;       // report on stderr (bar on a terminal, lines otherwise)
  std::size_t log_every = 0;  // epochs between plain lines; 0 = a tenth of the run
};

struct fit_result {
  std::vector<double> loss_history;  // loss before each epoch's update
  double seconds = 0.0;              // wall time of the training loop
};

namespace detail {
// At most 2^31 - 1 epochs a fit (the GPU's one-launch loop counts in int): a larger
// count is far more likely a negative number converted to std::size_t, which would
// otherwise fail as std::length_error while the loss history is reserved.
inline void check_epochs(const char* where, std::size_t epochs) {
  constexpr std::size_t most = 2147483647;
  if (epochs > most)
    throw std::invalid_argument(std::string("tapeless::") + where + ": epochs = " + std::to_string(epochs) +
                                " is more than " + std::to_string(most) +
                                " (a negative number converted to std::size_t?)");
}

// Batches hold the parameters' precision. A float batch for double parameters matched
// no overload (g++ listed the candidates); the CPU entry points' overloads for mixed
// precisions call this, which says it in one line.
template <class T, class... Batches>
inline constexpr bool same_precision = (std::is_same_v<T, Batches> && ...);
template <class T, class... Batches>
constexpr bool check_same_precision() {
  static_assert(same_precision<T, Batches...>,
                "tapeless: x and y must hold the parameters' precision (float with float parameters, double with "
                "double); convert a batch with x.cast<double>() or x.cast<float>()");
  return same_precision<T, Batches...>;
}

// x (and y, when given) must match the model and each other, and hold samples.
template <model Model, class X, class Y = X>
void check_batch(const char* where, const X& x, const Y* y = nullptr) {
  require_size(where, "the input rows (features of x) the model reads", Model::inputs, x.features());
  if (x.batch() == 0) throw shape_error(std::string("tapeless::") + where + ": the batch is empty (0 samples)");
  if (y) {
    require_size(where, "the target rows (features of y) the model writes", Model::outputs, y->features());
    if (x.batch() != y->batch())
      throw shape_error(std::string("tapeless::") + where + ": y has " + std::to_string(y->batch()) +
                        " samples and x has " + std::to_string(x.batch()) + "; every sample needs its target");
  }
}
}  // namespace detail

}  // namespace tl

// The wrong calls that are one static_assert each (after everything they name).
#include "tapeless/train/wrong_calls.hpp"
