// y = sin(y) * cos(y) * 0.9, 20 levels: the run-time constant 0.9 makes each level
// unshareable, so the expression would be copied 2^20 times. tl::lit<0.9> shares it.
#include "tapeless/tapeless.hpp"
template <int Depth, class Y>
auto nested(const Y& y) {
  if constexpr (Depth == 0) return y;
  else return nested<Depth - 1>(tl::sin(y) * tl::cos(y) * 0.9);
}
auto g = tl::value_and_grad([](auto x) { return nested<20>(x); }, std::array{0.5});
