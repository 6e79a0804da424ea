// A temporary state handed to fit (its trained parameters would be lost with it): one
// static_assert (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(tl::train_state(model, params, tl::adam{0.01}), tl::mse, x, y, 3).seconds > 0;
}
