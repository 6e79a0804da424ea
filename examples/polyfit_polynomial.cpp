// polyfit --model polynomial (examples/polyfit_polynomial.hpp); built by nvcc as
// polyfit_polynomial.cu, it fits on the GPU when one is usable.
#include "polyfit_polynomial.hpp"

#include <cstdio>
#include <stdexcept>

#include "polyfit_csv.hpp"
#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/nn/expression_model.hpp"
#if TL_DEVICE_COMPILER
#include "tapeless/cuda.hpp"
#include "tapeless/cuda/least_squares.hpp"
#endif

// The seed's quadratic fitted directly: a formula with three parameters.
int fit_polynomial(const seed_fit::data& data, const std::string& device_name, const std::string& csv_path) {
  const auto quadratic = tl::expression_model<3, 1>([](const auto& p, const auto& x) {
    const auto t = x[tl::idx<0>];
    return p[tl::idx<0>] * t * t + p[tl::idx<1>] * t + p[tl::idx<2>];
  });
  tl::rng unused(0);
  auto params = tl::init(quadratic, unused);  // a = b = c = 1
  tl::lsq::result<3> fit;
  std::string used = "cpu";
#if TL_DEVICE_COMPILER
  const tl::device dev = device_name == "cpu"    ? tl::cpu_device()
                         : device_name == "cuda" ? tl::cuda_device(0)
                                                 : tl::default_device();
  if (dev.is_cuda()) {
    fit = tl::least_squares(quadratic, params, tl::to_device(data.x), tl::to_device(data.y));
    used = dev.name();
  } else {
    fit = tl::least_squares(quadratic, params, data.x, data.y);
  }
#else
  if (device_name == "cuda") throw std::runtime_error("this polyfit was built by g++ without CUDA; build with nvcc");
  fit = tl::least_squares(quadratic, params, data.x, data.y);
#endif
  std::printf("device: %s\n", used.c_str());
  std::printf("a x^2 + b x + c by Levenberg-Marquardt: %s after %zu iterations\n", tl::lsq::to_string(fit.reason).c_str(),
              fit.iterations);
  const char* names[] = {"a", "b", "c"};
  for (int j = 0; j < 3; ++j) std::printf("  %s = %9.5f +- %.5f\n", names[j], fit.parameters[j], fit.standard_errors[j]);
  std::printf("residual sum of squares %.6f over %zu points (the data: y = x^2 - 2x + 0.1 N(0, 1))\n",
              fit.residual_sum_of_squares, fit.residuals);
  const tl::matrix yhat = tl::apply(quadratic, params, data.x);
  seed_fit::save_fit_csv(csv_path, data, yhat);
  return 0;
}

