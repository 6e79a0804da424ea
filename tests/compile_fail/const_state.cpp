// A const state handed to train_step (which changes it in place): one static_assert
// saying so (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  const auto& read_only = state;
  return tl::train_step(read_only, tl::mse, x, y) > 0;
}
