// value_and_grad given a state (evaluate_loss takes one; value_and_grad takes a model
// and its parameters): one static_assert (it was two pages of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::value_and_grad(tl::mse, state, x, y).loss > 0;
}
