// fit with the loss first and braced options, which no parameter pack can take: one
// static_assert (it was 9.5 KB of candidates).
#include "wrong_call_setup.hpp"
int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(tl::mse, state, x, y, 300, {.progress = false}).loss_history.size() > 0;
}
