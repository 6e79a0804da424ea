// Calls with their arguments out of order, or with a state that cannot be trained,
// which g++ answered with pages of candidate overloads (docs/performance.md, 2026-12-07
// evening, has their sizes before and after): here each is one
// static_assert that spells the right call. Every overload has the shape of a right
// call with one thing wrong in it (a loss where the state goes, a matrix where the loss
// goes, a const state), so that a right call never binds to it better than to the real
// function: a parameter pack in the place of the right call's arguments would match
// fit(state, loss, x, y, 300)'s int epochs exactly, where the real fit converts them:
// g++ then picks it, with a warning, where the standard calls the call ambiguous
// (tests/cpu/test_training.cpp, Fit.EveryEpochsTypeAndOptionsFormTrains).
// Each returns what the right call would where that result has members (value_and_grad's),
// so that the assertion is the only error; the rest return a number.
// tests/compile_fail/ holds one program per message.
#pragma once

#include <cstddef>

#include "tapeless/nn/chain.hpp"
#include "tapeless/nn/matrix.hpp"
#include "tapeless/nn/parameters.hpp"
#include "tapeless/train/state.hpp"

namespace tl {

namespace detail {
template <class>
inline constexpr bool is_train_state = false;
template <class Model, class Optimizer, class T>
inline constexpr bool is_train_state<train_state<Model, Optimizer, T>> = true;
}  // namespace detail

// The loss after the model (value_and_grad(model, tl::mse, ...), as a PyTorch user may
// write it) or after the state (the loss before the state in train_step). (Never
// viable for a right call: a loss is neither a model nor a state.)
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
// The same with braced options (fit(loss, state, x, y, 300, {.progress = false})): a
// braced list deduces no pack element, so the pack above never matched it, and g++
// listed 9.5 KB of candidates.
template <class Loss, class Model, class Optimizer, class T, class U, class V>
  requires(!model<Loss>)
fit_result fit(const Loss&, const train_state<Model, Optimizer, T>&, const basic_matrix<U>&, const basic_matrix<V>&,
               std::size_t, const fit_options&) {
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
// listed pages of candidates. In the right calls' own shapes with the state const: a
// named non-const state binds better to the real overload, every other argument equally.
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
  requires(!model<Loss> && !detail::is_train_state<Loss>)
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

// The model handed to train_step or fit beside its state (train_step(state, model, loss,
// x, y), as PyTorch's loop names the module), a page of candidates. A right call has a loss
// second, never a model.
template <class Model, class Optimizer, class T, model Other, class... Rest>
T train_step(const train_state<Model, Optimizer, T>&, const Other&, const Rest&...) {
  static_assert(sizeof(Model) == 0,
                "tapeless: train_step takes no model: the state holds it: tl::train_step(state, loss, x, y)");
  return {};
}
template <class Model, class Optimizer, class T, model Other, class... Rest>
fit_result fit(const train_state<Model, Optimizer, T>&, const Other&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes no model: the state holds it: tl::fit(state, loss, x, y, epochs)");
  return {};
}
template <class Model, class Optimizer, class T, model Other, class Loss, class U, class V>
fit_result fit(const train_state<Model, Optimizer, T>&, const Other&, const Loss&, const basic_matrix<U>&,
               const basic_matrix<V>&, std::size_t, const fit_options&) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes no model: the state holds it: tl::fit(state, loss, x, y, epochs)");
  return {};
}
// A model and its parameters where the state goes (fit(model, params, loss, x, y, 300),
// as Lux's functional style keeps them apart). A right call starts with a state.
template <model Model, class T, class... Rest>
double train_step(const Model&, const parameters<Model, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step trains a train_state, which holds the model, its parameters "
                                    "and the optimizer: tl::train_state state(model, params, tl::adam{1e-3}); "
                                    "tl::train_step(state, loss, x, y)");
  return {};
}
template <model Model, class T, class... Rest>
fit_result fit(const Model&, const parameters<Model, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit trains a train_state, which holds the model, its parameters and the "
                                    "optimizer: tl::train_state state(model, params, tl::adam{1e-3}); "
                                    "tl::fit(state, loss, x, y, epochs)");
  return {};
}
// fit without its epochs (fit(state, loss, x, y)), whose candidates never said "epochs".
// Four arguments are never a right call of fit.
template <class Model, class Optimizer, class T, class Loss, class U, class V>
fit_result fit(const train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&, const basic_matrix<V>&) {
  static_assert(sizeof(Model) == 0, "tapeless: fit needs the number of epochs: tl::fit(state, loss, x, y, epochs) "
                                    "(tl::train_step(state, loss, x, y) takes one step)");
  return {};
}
// train_step without the targets (train_step(state, loss, x)). Three arguments
// are never a right call of train_step.
template <class Model, class Optimizer, class T, class Loss, class U>
T train_step(const train_state<Model, Optimizer, T>&, const Loss&, const basic_matrix<U>&) {
  static_assert(sizeof(Model) == 0, "tapeless: train_step needs the targets too: tl::train_step(state, loss, x, y)");
  return {};
}
// The epochs before the batch (fit(state, loss, 300, x, y)). A right call has
// a matrix third.
template <class Model, class Optimizer, class T, class Loss, class U, class... Rest>
fit_result fit(const train_state<Model, Optimizer, T>&, const Loss&, std::size_t, const basic_matrix<U>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: fit takes the batch before the epochs: tl::fit(state, loss, x, y, epochs)");
  return {};
}
// A state where value_and_grad takes a model and its parameters (evaluate_loss takes
// either), and a state followed by parameters in evaluate_loss. A right
// call has a model second, or a state and then the batch.
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
loss_and_gradient<Model, T> value_and_grad(const Loss&, const train_state<Model, Optimizer, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: value_and_grad takes a model and its parameters, not a state: "
                                    "tl::value_and_grad(loss, state.model, state.params, x, y)");
  return {};
}
// A state and its parameters with no loss (value_and_grad(state, params, x, y)), which
// the parameters-before-model assertion above answered with the model's order alone.
template <class Model, class Optimizer, class T, class... Rest>
loss_and_gradient<Model, T> value_and_grad(const train_state<Model, Optimizer, T>&, const parameters<Model, T>&,
                                           const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: value_and_grad takes the loss first, then a model and its parameters, "
                                    "not a state: tl::value_and_grad(loss, state.model, state.params, x, y)");
  return {};
}
template <class Loss, class Model, class Optimizer, class T, class... Rest>
  requires(!model<Loss>)
T evaluate_loss(const Loss&, const train_state<Model, Optimizer, T>&, const parameters<Model, T>&, const Rest&...) {
  static_assert(sizeof(Model) == 0, "tapeless: evaluate_loss takes a state or a model with its parameters: "
                                    "tl::evaluate_loss(loss, state, x, y) or tl::evaluate_loss(loss, model, params, x, y)");
  return {};
}

}  // namespace tl
