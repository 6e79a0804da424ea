// What the wrong-call programs here share: a small model, its parameters, a state
// training it and a batch, as names a user would have (auto [model, params, state,
// x, y] = tl_test::wrong_call_setup();). Each program then makes one wrong call.
#pragma once

#include "tapeless/tapeless.hpp"

namespace tl_test {

inline auto wrong_call_model() { return tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()); }
using wrong_call_model_type = decltype(wrong_call_model());

struct wrong_call_names {
  wrong_call_model_type model;
  tl::parameters<wrong_call_model_type, float> params;
  tl::train_state<wrong_call_model_type, tl::adam, float> state;
  tl::matrix x, y;
};

inline wrong_call_names wrong_call_setup() {
  const auto model = wrong_call_model();
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  return {model, params, tl::train_state(model, params, tl::adam{0.01}), tl::matrix(1, 8), tl::matrix(1, 8)};
}

}  // namespace tl_test
