// The parameters before the model in value_and_grad: one static_assert saying so (it
// was 61 lines of candidates).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::matrix x(1, 8), y(1, 8);
  const auto r = tl::value_and_grad(tl::mse, params, model, x, y);
  return r.loss > 0;
}
