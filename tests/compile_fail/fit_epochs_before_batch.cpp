// The epochs before the batch in fit: one static_assert (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(state, tl::mse, 300, x, y).seconds > 0;
}
