// fit without its epochs: one static_assert that says so (its page of candidates
// never said "epochs").
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(state, tl::mse, x, y).seconds > 0;
}
