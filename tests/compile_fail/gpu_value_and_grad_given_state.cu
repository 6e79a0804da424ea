// value_and_grad given a GPU state: one static_assert naming the model and its host
// parameters (nvcc listed 3.9 KB of candidates).
#include "tapeless/cuda.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>());
  tl::rng gen(1);
  tl::cuda_train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  const auto x = tl::to_device(tl::matrix(1, 8)), y = tl::to_device(tl::matrix(1, 8));
  return tl::value_and_grad(tl::mse, state, x, y).loss > 0;
}
