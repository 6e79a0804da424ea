// train_step without the targets: one static_assert (it was 3.4 KB).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::train_state state(model, params, tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  return tl::train_step(state, tl::mse, x) > 0;
}
