// A float batch for a double-precision training state: one static_assert naming the
// fix (it was g++'s "no matching function" and its list of candidates).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::train_state state(model, tl::init<double>(model, gen), tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  (void)tl::train_step(state, tl::mse, x, y);
}
