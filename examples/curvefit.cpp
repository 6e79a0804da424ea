// Fits y = a exp(-b x) + c to a million noisy points by Levenberg-Marquardt and
// prints the parameters with their standard errors, on the GPU when one is usable
// (this file built by nvcc: curvefit.cu), else on the CPU. The model is a formula
// traced at compile time; each iteration's normal equations come from one fused pass.
//
//   curvefit [--points N] [--device cpu|cuda|auto]
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/nn/expression_model.hpp"
#include "tapeless/tapeless.hpp"
#if TL_DEVICE_COMPILER
#include "tapeless/cuda.hpp"
#include "tapeless/cuda/least_squares.hpp"
#endif

int main(int argc, char** argv) try {
  std::size_t points = 1'000'000;
  std::string device_name = "auto";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--points") points = std::stoul(argv[i + 1]);
    else if (option == "--device") device_name = argv[i + 1];
    else throw std::invalid_argument("unknown option " + option + " (curvefit [--points N] [--device cpu|cuda|auto])");
  }
  if (points < 4) throw std::invalid_argument("--points must be at least 4");

  // The data: a = 2.5, b = 1.3, c = 0.4, x in [0, 5], noise 0.05 N(0, 1).
  tl::rng noise(7);
  tl::basic_matrix<double> x(1, points), y(1, points);
  for (std::size_t s = 0; s < points; ++s) {
    x(0, s) = 5.0 * double(s) / double(points - 1);
    y(0, s) = 2.5 * std::exp(-1.3 * x(0, s)) + 0.4 + 0.05 * noise.normal();
  }

  const auto decay = tl::expression_model<3, 1>(
      [](const auto& p, const auto& x) { return p[tl::idx<0>] * tl::exp(-p[tl::idx<1>] * x[tl::idx<0>]) + p[tl::idx<2>]; },
      {1.0, 1.0, 0.0});  // a, b, c to start from
  tl::rng unused(0);
  auto params = tl::init<double>(decay, unused);

  // Timed: the fit alone (the data already where it is fitted; the device's start-up,
  // the copy to it and the first allocations come before).
  tl::lsq::result<3> fit;
  std::string used = "cpu";
  std::chrono::steady_clock::time_point start;
#if TL_DEVICE_COMPILER
  const tl::device dev = device_name == "cpu" ? tl::cpu_device() : device_name == "cuda" ? tl::cuda_device(0) : tl::default_device();
  if (dev.is_cuda()) {
    const auto dx = tl::to_device(x), dy = tl::to_device(y);
    auto warm = params;
    (void)tl::least_squares(decay, warm, dx, dy, {.max_iterations = 1});
    start = std::chrono::steady_clock::now();
    fit = tl::least_squares(decay, params, dx, dy);
    used = dev.name();
  } else {
    start = std::chrono::steady_clock::now();
    fit = tl::least_squares(decay, params, x, y);
  }
#else
  if (device_name == "cuda") throw std::runtime_error("this curvefit was built by g++ without CUDA; build with nvcc");
  start = std::chrono::steady_clock::now();
  fit = tl::least_squares(decay, params, x, y);
#endif
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("device: %s, %zu points\n", used.c_str(), points);
  std::printf("y = a exp(-b x) + c, Levenberg-Marquardt: %s\n", tl::lsq::to_string(fit.reason).c_str());
  std::printf("  %zu iterations, %zu passes over the data, %.1f ms (%.2f ms a pass)\n", fit.iterations,
              fit.function_evaluations, seconds * 1e3, seconds * 1e3 / double(fit.function_evaluations));
  const char* names[] = {"a", "b", "c"};
  const double truth[] = {2.5, 1.3, 0.4};
  for (int j = 0; j < 3; ++j)
    std::printf("  %s = %.6f +- %.6f   (true value %.1f)\n", names[j], fit.parameters[j], fit.standard_errors[j], truth[j]);
  std::printf("  residual sum of squares %.6g, noise variance estimate %.6g (true 0.0025)\n",
              fit.residual_sum_of_squares, fit.residual_sum_of_squares / double(fit.residuals - 3));
  return fit.converged() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "curvefit: %s\n", e.what());
  return 1;
}
