// Prints the bits of tl::init's parameters for a model with every kind of initialised
// layer, in float and double; tests/init/bitwise.sh compares the output across
// compilers and flags (FMA contraction, -march=native, -O0).
#include <cstdio>
#include <cstring>

#include "tapeless/tapeless.hpp"

template <class T, class Model>
void print(const Model& model, unsigned seed) {
  tl::rng gen(seed);
  const auto p = tl::init<T>(model, gen);
  for (const T v : p.flat()) {
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    std::printf("%llx\n", bits);
  }
}

int main() {
  const auto model = tl::chain(tl::dense<3, 40>(tl::gelu), tl::skip(tl::dense<40, 40>(tl::tanh)), tl::layer_norm<40>(),
                               tl::dense<40, 7>());
  print<float>(model, 1);
  print<double>(model, 2);
  tl::rng gen(3);
  for (int i = 0; i < 100; ++i) {
    const double u = gen.uniform(-0.3f, 0.7f);  // sequenced: argument order is unspecified
    const double n = gen.normal();
    std::printf("%a %a\n", u, n);
  }
  for (const std::size_t i : gen.permutation(1000)) std::printf("%zu\n", i);  // a shuffled mini-batch order
}
