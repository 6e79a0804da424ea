// The model before the loss, as a PyTorch user may write it: one static_assert saying
// the loss comes first (it was g++'s "no matching function" and its candidates).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::matrix x(1, 8), y(1, 8);
  const auto result = tl::value_and_grad(model, tl::mse, params, x, y);
  return result.loss > 0;
}
