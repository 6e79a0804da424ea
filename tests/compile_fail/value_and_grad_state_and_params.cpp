// value_and_grad given a state and its parameters and no loss, as a PyTorch user
// may write it: one static_assert that names the loss and the state's members (it
// was the parameters-before-model message, which named neither).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::value_and_grad(state, params, x, y).loss > 0;
}
