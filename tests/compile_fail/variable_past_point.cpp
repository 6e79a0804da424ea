// Must not compile: the expression reads variable 2 of a 2-element point.
#include "tapeless/tapeless.hpp"
int main() {
  auto r = tl::value_and_grad(tl::var<0> * tl::var<2>, std::array{1.0, 2.0});
  (void)r;
}
