// A formula that turns a parameter into a plain number: not differentiable that way.
#include "tapeless/tapeless.hpp"
#include "tapeless/nn/expression_model.hpp"
auto model = tl::expression_model<2, 1>([](const auto& p, const auto& x) {
  const double scale = static_cast<double>(p[tl::idx<1>]);
  return p[tl::idx<0>] * x[tl::idx<0>] * scale;
});
