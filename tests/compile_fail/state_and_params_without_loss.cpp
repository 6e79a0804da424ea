// evaluate_loss given a state and parameters, and no loss: one static_assert (it was
// an ambiguous call between two of the wrong-order overloads).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::evaluate_loss(state, params, x, y) > 0;
}
