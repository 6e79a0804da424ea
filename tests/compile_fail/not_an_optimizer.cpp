#include "tapeless/tapeless.hpp"
int main() {
  const auto model = tl::chain(tl::dense<1, 1>());
  tl::rng gen(1);
  tl::train_state state(model, tl::init(model, gen), 0.01);
  return state.step > 0;
}
