// train_step without the targets: one static_assert (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::train_step(state, tl::mse, x) > 0;
}
