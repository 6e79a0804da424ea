// The batch before the loss in fit, with braced options (as the README writes them,
// which no parameter pack takes): one static_assert saying so (it was 32 lines).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  const auto run = tl::fit(state, x, y, tl::mse, 300, {.progress = false});
  return run.seconds > 0;
}
