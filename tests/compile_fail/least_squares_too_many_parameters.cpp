#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/tapeless.hpp"
int main() {
  // 1-85-1: 256 parameters, past lsq::max_parameters (it overflowed the stack).
  const auto model = tl::chain(tl::dense<1, 85>(tl::tanh), tl::dense<85, 1>());
  tl::rng gen(1);
  auto params = tl::init<double>(model, gen);
  tl::basic_matrix<double> x(1, 300), y(1, 300);
  return tl::least_squares(model, params, x, y).converged();
}
