// value_and_grad given a state (evaluate_loss takes one; value_and_grad takes a model and its
// parameters): one static_assert (it was 8.4 KB).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::train_state state(model, params, tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  return tl::value_and_grad(tl::mse, state, x, y).loss > 0;
}
