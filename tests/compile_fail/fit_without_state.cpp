// A model and its parameters where fit's state goes (Lux keeps them apart): one
// static_assert that says how to make the state (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(model, params, tl::mse, x, y, 300).seconds > 0;
}
