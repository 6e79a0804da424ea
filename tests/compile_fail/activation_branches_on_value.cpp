#include "tapeless/tapeless.hpp"
auto leaky = [](auto x) {
  if (x > 0.0) return x * 1.0;
  return x * 0.01;
};
auto model = tl::chain(tl::dense<1, 4>(leaky), tl::dense<4, 1>());
