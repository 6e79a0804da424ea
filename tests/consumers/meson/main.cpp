// A Meson user's program: a gradient computed by tapeless; exit 0 when it is right.
#include <array>
#include <cmath>
#include <cstdio>

#include "tapeless/tapeless.hpp"

int main() {
  auto f = [](auto x, auto y) { return x * y + tl::sin(x); };
  auto [value, gradient] = tl::value_and_grad(f, std::array{0.5, 2.0});
  const bool right = std::abs(gradient[0] - (2.0 + std::cos(0.5))) < 1e-12 && std::abs(gradient[1] - 0.5) < 1e-12;
  std::printf("meson consumer: f = %.6f, gradient (%.6f, %.6f)\n", double(value), gradient[0], gradient[1]);
  return right ? 0 : 1;
}
