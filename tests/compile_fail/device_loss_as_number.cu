// The GPU train_step's loss read as a number, as the CPU's is: one static_assert naming
// .get() (it was "no suitable conversion function").
#include "tapeless/cuda.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::cuda_train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  const auto x = tl::to_device(tl::matrix(1, 8)), y = tl::to_device(tl::matrix(1, 8));
  const float loss = tl::train_step(state, tl::mse, x, y);
  return loss > 0;
}
