// The model handed to fit beside the state that holds it (as PyTorch's loop names the
// module): one static_assert (it was a page of candidates).
#include "wrong_call_setup.hpp"

int main() {
  auto [model, params, state, x, y] = tl_test::wrong_call_setup();
  return tl::fit(state, model, tl::mse, x, y, 300).seconds > 0;
}
