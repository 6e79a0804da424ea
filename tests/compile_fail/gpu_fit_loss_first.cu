// fit with the loss before a GPU state and braced options, as the CPU's slip: one
// static_assert (nvcc listed 5.5 KB of candidates).
#include "tapeless/cuda.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::cuda_train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  const auto x = tl::to_device(tl::matrix(1, 8)), y = tl::to_device(tl::matrix(1, 8));
  return tl::fit(tl::mse, state, x, y, 300, {.progress = true}).loss_history.empty();
}
