// The batch before the loss in train_step (the loss comes second there, after the
// state): one static_assert saying so (it was g++'s "no matching function" and 28 lines).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  const float loss = tl::train_step(state, x, y, tl::mse);
  return loss > 0;
}
