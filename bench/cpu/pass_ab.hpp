// The lane pass against the blocked pass on one model, side by side: one full-batch
// value_and_grad of MSE through each (cpu/pass_choice.hpp), median over repetitions,
// the passes alternating; and the pass the model's type takes. Shared by
// bench/cpu/other_layers_step.cpp and bench/cpu/one_hidden_layer_step.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace bench::pass_ab {

struct options {
  std::vector<std::size_t> batches{1000, 10000};
  int reps = 5;
};

// A whole number in [1, 1e8] written as digits or in e-notation (1e4), or 0 if the
// text is anything else.
inline std::size_t count_from(const char* begin, const char* end) {
  char* stop = nullptr;
  const double v = std::strtod(begin, &stop);
  if (stop != end || !(v >= 1 && v <= 1e8) || v != double(std::size_t(v))) return 0;
  return std::size_t(v);
}

// --batches 1e3,1e4 --reps 5; anything else prints the usage and exits with 2.
inline options parse(int argc, char** argv, const char* program) {
  options o;
  const auto usage = [&](const char* why) {
    if (why) std::fprintf(stderr, "%s: %s\n", program, why);
    std::fprintf(stderr, "usage: %s [--batches 1e3,1e4] [--reps 5]   (batches: whole numbers from 1 to 1e8)\n", program);
    std::exit(2);
  };
  for (int a = 1; a < argc; a += 2) {
    if (a + 1 >= argc) usage(std::strcmp(argv[a], "--help") && std::strcmp(argv[a], "-h") ? "an option without its value" : nullptr);
    const char* value = argv[a + 1];
    if (!std::strcmp(argv[a], "--reps")) {
      const std::size_t reps = count_from(value, value + std::strlen(value));
      if (reps == 0 || reps > 1000) usage("--reps takes a whole number from 1 to 1000");
      o.reps = int(reps);
    } else if (!std::strcmp(argv[a], "--batches")) {
      o.batches.clear();
      for (const char* c = value;; ++c) {
        const char* comma = std::strchr(c, ',');
        const char* end = comma ? comma : c + std::strlen(c);
        const std::size_t batch = count_from(c, end);
        if (batch == 0) usage("--batches takes whole numbers from 1 to 1e8, separated by commas");
        o.batches.push_back(batch);
        if (!comma) break;
        c = comma;
      }
    } else {
      usage(nullptr);
    }
  }
  try {
    std::printf("# %s --reps %d, %zu threads\n", program, o.reps, tl::detail::cpu_pool().size());
  } catch (const std::exception& e) {  // TAPELESS_CPU_THREADS that is not a count
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    std::exit(2);
  }
  return o;
}

template <tl::cpu_pass Pass, class Model>
double step_us(const Model& model, const tl::parameters<Model, float>& p, const tl::matrix& x, const tl::matrix& y) {
  std::vector<float> grad(Model::parameter_count);
  const auto start = std::chrono::steady_clock::now();
  tl::detail::fused_loss_and_gradient<Pass>(model, tl::mse, p.data(), x.data(), y.data(), x.batch(), grad.data());
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

template <class Model>
void time_batches(const options& o, const char* name, const Model& model) {
  for (const std::size_t batch : o.batches) {
    tl::rng gen(7);
    const auto p = tl::init(model, gen);
    tl::matrix x(Model::inputs, batch), y(Model::outputs, batch);
    for (float& v : x.values()) v = float(gen.uniform(-1, 1));
    for (float& v : y.values()) v = float(gen.uniform(-1, 1));
    std::vector<double> lanes, blocked;
    step_us<tl::cpu_pass::blocked>(model, p, x, y);  // warm: buffers, threads
    step_us<tl::cpu_pass::lanes>(model, p, x, y);
    for (int r = 0; r < o.reps; ++r) {
      lanes.push_back(step_us<tl::cpu_pass::lanes>(model, p, x, y));
      blocked.push_back(step_us<tl::cpu_pass::blocked>(model, p, x, y));
    }
    std::sort(lanes.begin(), lanes.end());
    std::sort(blocked.begin(), blocked.end());
    const double l = lanes[lanes.size() / 2], b = blocked[blocked.size() / 2];
    std::printf("%-32s batch %-7zu lanes %10.1f us   blocked %10.1f us   %.2fx   (by type: %s)\n", name, batch, l, b,
                l / b, tl::detail::pass_by_type<Model>() == tl::cpu_pass::blocked ? "blocked" : "lanes");
    std::fflush(stdout);
  }
}

template <class Model>
void time_model(const options& o, const char* name, const Model& model) {
  try {
    time_batches(o, name, model);
  } catch (const std::exception& e) {  // a bad TAPELESS_CPU_PASS, no memory for the batch
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    std::exit(1);
  }
}

}  // namespace bench::pass_ab
