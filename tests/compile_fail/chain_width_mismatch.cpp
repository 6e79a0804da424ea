// Must not compile: layer 2 reads 4 inputs, layer 1 gives 8.
#include "tapeless/tapeless.hpp"
int main() {
  auto model = tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 8>(), tl::dense<4, 1>());
  (void)model;
}
