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
#include "tapeless/nn/matrix.hpp"
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

namespace detail {
template <class>
inline constexpr bool is_train_state = false;
template <class Model, class Optimizer, class T>
inline constexpr bool is_train_state<train_state<Model, Optimizer, T>> = true;
}  // namespace detail

// The arguments out of order (value_and_grad(model, tl::mse, ...), as a PyTorch user
// may write it; the loss before the state in train_step) matched no overload, and g++
// listed the candidates in 20-42 lines; these say it in one. (Never viable for a right
// call: a loss is neither a model nor a state.) Each returns what the right call would
// where that result has members (value_and_grad's), so that the assertion is the only
// error; the rest return a number.
template <model Model, class Loss, class T, class... Batches>
  requires(!model<Loss>)
loss_and_gradient<Model, T> value_and_grad(const Model&, const Loss&, const parameters<Model, T>&, const Batches&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: value_and_grad takes the loss first: tl::value_and_grad(loss, model, params, x, y)");
  return {};
}
template <model Model, class Loss, class First, class... Batches>  // anything else in params' place
  requires(!model<Loss>)
double value_and_grad(const Model&, const Loss&, const First&, const Batches&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: value_and_grad takes the loss first: tl::value_and_grad(loss, model, params, x, y)");
  return {};
}
template <model Model, class Loss, class First, class... Batches>
  requires(!model<Loss>)
double evaluate_loss(const Model&, const Loss&, const First&, const Batches&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: evaluate_loss takes the loss first: tl::evaluate_loss(loss, model, params, x, y)");
  return {};
}
template <class Model, class Optimizer, class T, class Loss, class... Batches>
  requires(!model<Loss>)
T evaluate_loss(const train_state<Model, Optimizer, T>&, const Loss&, const Batches&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: evaluate_loss takes the loss first: tl::evaluate_loss(loss, train_state, x, y)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
T train_step(const Loss&, const train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step takes the state first: tl::train_step(state, loss, x, y)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
fit_result fit(const Loss&, const train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the state first: tl::fit(state, loss, x, y, epochs)");
  return {};
}
// The batch where the loss goes (train_step(state, x, y, loss), as in Optax's
// update(grads, state)): g++ listed 28 lines of candidates. A right call has a loss
// second, never a matrix.
template <class Model, class Optimizer, class T, class U, class... Rest>
T train_step(const train_state<Model, Optimizer, T>&, const basic_matrix<U>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step takes the loss second: tl::train_step(state, loss, x, y)");
  return {};
}
template <class Model, class Optimizer, class T, class U, class... Rest>
fit_result fit(const train_state<Model, Optimizer, T>&, const basic_matrix<U>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the loss second: tl::fit(state, loss, x, y, epochs)");
  return {};
}
// ... with the options braced, {.progress = false}, which a pack cannot take.
template <class Model, class Optimizer, class T, class U, class V, class Loss>
fit_result fit(const train_state<Model, Optimizer, T>&, const basic_matrix<U>&, const basic_matrix<V>&, const Loss&,
               std::size_t, const fit_options&) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the loss second: tl::fit(state, loss, x, y, epochs)");
  return {};
}
// A const or temporary state, which train_step and fit would change in place: g++
// listed 4-8 KB of candidates. These have the right calls' own shapes with the state
// const: for a named non-const state the real overload binds it better and every other
// argument equally (a pack here would match fit's int epochs exactly, where the real
// fit converts them, and win).
template <class Model, class Optimizer, class T, class Loss, class U, class V>
T train_step(const train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&, const basic_matrix<V>&) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step changes the state in place: give it a named, non-const "
                                    "state (auto s = state; tl::train_step(s, loss, x, y))");
  return {};
}
template <class Model, class Optimizer, class T, class Loss, class U, class V>
fit_result fit(const train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&, const basic_matrix<V>&,
               std::size_t, const fit_options& = {}) {
  static_assert(sizeof(Model) == 0, "tapeless: fit changes the state in place: give it a named, non-const state "
                                    "(auto s = state; tl::fit(s, loss, x, y, epochs))");
  return {};
}
// The parameters before the model (value_and_grad(loss, params, model, x, y)): 61
// lines of candidates. A right call has a model second, never parameters. (A state
// first, evaluate_loss(state, params, x, y), is the loss-first assertion above's.)
template <class Loss, class Model, class T, class... Rest>
  requires(!model<Loss>)
loss_and_gradient<Model, T> value_and_grad(const Loss&, const parameters<Model, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: value_and_grad takes the model before its parameters: tl::value_and_grad(loss, model, params, x, y)");
  return {};
}
template <class Loss, class Model, class T, class... Rest>
  requires(!model<Loss> && !detail::is_train_state<Loss>)
T evaluate_loss(const Loss&, const parameters<Model, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: evaluate_loss takes the model before its parameters: tl::evaluate_loss(loss, model, params, x, y)");
  return {};
}

}  // namespace tl
