// A Meson user's .cu file: loss and gradient on the GPU. The 1-64-64-1 model takes the
// tiled kernels, whose device code calls constexpr helpers (nvcc needs
// --expt-relaxed-constexpr, which comes with the dependency).
#include <cstdio>
#include <vector>

#include "tapeless/cuda.hpp"

int main() {
  const auto model = tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu), tl::dense<64, 1>());
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  const tl::matrix x(1, 4, std::vector<float>{-1, 0, 1, 2}), y(1, 4, std::vector<float>{1, 0, 1, 4});
  if (!tl::default_device().is_cuda()) {
    std::printf("no GPU: nothing to run\n");
    return 0;
  }
  const auto result = tl::value_and_grad(tl::mse, model, params, tl::to_device(x), tl::to_device(y));
  std::printf("loss on the GPU: %.6f\n", double(result.loss));
  return 0;
}
