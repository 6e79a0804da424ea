#include "tapeless/tapeless.hpp"
int main() {
  const auto model = tl::chain(tl::dense<1, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::matrix x(1, 4), y(1, 4);
  return tl::value_and_grad(tl::gelu, model, params, x, y).loss > 0;
}
