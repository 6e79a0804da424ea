// A model and its parameters where fit's state goes (Lux keeps them apart): one
// static_assert that says how to make the state (it was 5.9 KB).
#include "tapeless/tapeless.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  tl::train_state state(model, params, tl::adam{0.01});
  tl::matrix x(1, 8), y(1, 8);
  return tl::fit(model, params, tl::mse, x, y, 300).seconds > 0;
}
