// The benchmark grid's models, data, options and output, shared by the CPU driver
// (grid_cpu.cpp, g++) and the GPU driver (grid_gpu.cu, nvcc). One executable per
// width (-DGRID_WIDTH=W, a Meson loop): each holds depths {2, 4, 8} x {tanh, gelu},
// six model types, so no translation unit instantiates the whole grid.
//
// A cell: MLP 2 -> W -> ... -> W -> 1 of `depth` dense layers (the hidden ones take
// the activation, the last is linear), MSE, Adam(1e-3), fp32, full-batch steps.
// FLOPs per step: 6 B In Out per dense layer (forward, input delta, weight
// gradient); activations, biases, the loss and Adam count as zero, so the figure is a
// fraction of the machine's matmul peak and the same for tanh and gelu (at width 16
// the activations are a visible share of the real work that it leaves out).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#ifndef GRID_WIDTH
#error "compile with -DGRID_WIDTH=<hidden width> (bench/meson.build builds one executable per width)"
#endif

namespace grid {

inline constexpr std::size_t width = GRID_WIDTH;
inline constexpr std::size_t inputs = 2, outputs = 1;
using depths = std::index_sequence<2, 4, 8>;

// 2 -> W (act), (depth - 2) x W -> W (act), W -> 1: a fold over an index sequence.
template <std::size_t Depth, class Act>
auto make_mlp(const Act& act) {
  static_assert(Depth >= 2);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return tl::chain(tl::dense<inputs, width>(act), ((void)I, tl::dense<width, width>(act))...,
                     tl::dense<width, outputs>());
  }(std::make_index_sequence<Depth - 2>{});
}

inline double step_flops(std::size_t depth, std::size_t batch) {
  const double w = double(width), per_sample = inputs * w + double(depth - 2) * w * w + w * outputs;
  return 6.0 * double(batch) * per_sample;
}
inline std::size_t parameter_count(std::size_t depth) {
  return inputs * width + width + (depth - 2) * (width * width + width) + width * outputs + outputs;
}

// Inputs from the additive recurrence (R2 sequence) over [-2, 2]^2, y = sin(x0) cos(x1):
// no generator, so bench/grid/peers.py makes the same batch with numpy.
inline tl::matrix make_x(std::size_t batch) {
  tl::matrix x(inputs, batch);
  for (std::size_t s = 0; s < batch; ++s) {
    const double a = 0.5 + double(s) * 0.7548776662466927, b = 0.5 + double(s) * 0.5698402909980532;
    x(0, s) = float(-2.0 + 4.0 * (a - std::floor(a)));
    x(1, s) = float(-2.0 + 4.0 * (b - std::floor(b)));
  }
  return x;
}
inline tl::matrix make_y(const tl::matrix& x) {
  tl::matrix y(outputs, x.batch());
  for (std::size_t s = 0; s < x.batch(); ++s) y(0, s) = float(std::sin(double(x(0, s))) * std::cos(double(x(1, s))));
  return y;
}

struct options {
  std::vector<std::size_t> depths{2, 4, 8};
  std::vector<std::size_t> batches{1000, 10000, 100000, 1000000};
  std::vector<std::string> acts{"tanh", "gelu"};
  int reps = 5;                // timed fits per cell (median), after the warm-up
  double target_ms = 100;      // steps per fit: about this long, from a probe step
  std::size_t min_steps = 2, max_steps = 2000;
  double max_step_s = 5;       // skip a cell whose step is estimated longer than this
  double assume_gflops = 20;   // the rate of that estimate (bench/grid/README.md)
  std::string command;         // how this run was started, printed with the results
};

inline std::vector<std::string> split(const char* list) {
  std::vector<std::string> out;
  std::string item;
  for (const char* c = list;; ++c) {
    if (*c == ',' || *c == 0) {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*c == 0) return out;
    } else {
      item += *c;
    }
  }
}
[[noreturn]] inline void usage_error(const char* program, const std::string& why) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s [--depths 2,4,8] [--batches 1e3,1e4,1e5,1e6] [--acts tanh,gelu] [--reps 5] "
               "[--target-ms 100] [--min-steps 2] [--max-steps 2000] [--max-step-s 5] [--assume-gflops G]\n",
               program, why.c_str(), program);
  std::exit(2);
}
// Positive whole numbers; 1e5 reads. Anything else is a usage error naming it.
inline std::vector<std::size_t> split_sizes(const char* program, const std::string& option, const char* list) {
  std::vector<std::size_t> out;
  for (const auto& s : split(list)) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != 0 || !(v >= 1) || v != double(std::size_t(v)))
      usage_error(program, option + ": '" + s + "' is not a positive whole number (1000 and 1e3 read)");
    out.push_back(std::size_t(v));
  }
  if (out.empty()) usage_error(program, option + " needs at least one value");
  return out;
}

// The drivers build these depths (grid::depths, the sequence for_each_depth runs) and
// activations (the names each driver's main passes to run_model); asking for others is
// a usage error, not an empty table.
inline constexpr auto built_depths = []<std::size_t... D>(std::index_sequence<D...>) {
  return std::array<std::size_t, sizeof...(D)>{D...};
}(depths{});
inline constexpr std::array<const char*, 2> built_acts{"tanh", "gelu"};
template <class List>
std::string listed(const List& list) {  // "2, 4, 8"
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

inline options parse(int argc, char** argv, double default_gflops) {
  options o;
  o.assume_gflops = default_gflops;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  const char* program = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    static const char* const known[] = {"--depths",    "--batches",   "--acts",       "--reps",          "--target-ms",
                                        "--min-steps", "--max-steps", "--max-step-s", "--assume-gflops"};
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return a == k; }) == std::end(known))
      usage_error(program, "unknown option '" + a + "'");
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) usage_error(program, a + " needs a value");
    if (a == "--depths") o.depths = split_sizes(program, a, v);
    else if (a == "--batches") o.batches = split_sizes(program, a, v);
    else if (a == "--acts") {
      o.acts = split(v);
      if (o.acts.empty()) usage_error(program, "--acts needs at least one value");
    }
    else if (a == "--reps") o.reps = std::max(1, std::atoi(v));
    else if (a == "--target-ms") o.target_ms = std::atof(v);
    else if (a == "--min-steps") o.min_steps = std::max<std::size_t>(1, std::strtoul(v, nullptr, 10));
    else if (a == "--max-steps") o.max_steps = std::max<std::size_t>(1, std::strtoul(v, nullptr, 10));
    else if (a == "--max-step-s") o.max_step_s = std::atof(v);
    else o.assume_gflops = std::atof(v);
    ++i;
  }
  std::array<std::string, built_depths.size()> depth_names;
  std::transform(built_depths.begin(), built_depths.end(), depth_names.begin(),
                 [](std::size_t d) { return std::to_string(d); });
  for (const std::size_t d : o.depths)
    if (std::find(built_depths.begin(), built_depths.end(), d) == built_depths.end())
      usage_error(program, "depth " + std::to_string(d) + " is not built; the drivers have depths " +
                               listed(depth_names) +
                               " (dense layers: 2 -> W, depth - 2 of W -> W, W -> 1; bench/grid/README.md)");
  for (const auto& act : o.acts)
    if (std::find(built_acts.begin(), built_acts.end(), act) == built_acts.end())
      usage_error(program, "activation '" + act + "' is not built; the drivers have " + listed(built_acts));
  return o;
}

inline bool wanted(const std::vector<std::size_t>& list, std::size_t v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// Steps per timed fit from a probe step's time: about target_ms, within the bounds.
inline std::size_t steps_for(const options& o, double probe_seconds) {
  const double steps = o.target_ms * 1e-3 / std::max(probe_seconds, 1e-9);
  return std::clamp(std::size_t(std::llround(steps)), o.min_steps, o.max_steps);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline void print_cell_head(const char* act, std::size_t depth, std::size_t batch) {
  std::printf("cell %s w=%zu d=%zu b=%zu ", act, width, depth, batch);
}

struct measurement {
  double us_per_step;   // median over the repetitions
  std::size_t steps;    // per timed fit
  double loss;          // the last step's loss (the run trains: it should fall)
};

// o.reps fits of `steps` each (fit(steps) returns a tl::fit_result), continuing from
// the state before: a step costs the same. The median time a step, and the last loss.
template <class Fit>
measurement timed_fits(const options& o, std::size_t steps, Fit fit) {
  std::vector<double> per_step;
  double loss = 0;
  for (int r = 0; r < o.reps; ++r) {
    const auto run = fit(steps);
    per_step.push_back(run.seconds * 1e6 / double(steps));
    loss = run.loss_history.back();
  }
  return {median(per_step), steps, loss};
}

inline void print_measurement(const char* act, std::size_t depth, std::size_t batch, const measurement& m,
                              int reps) {
  const double flops = step_flops(depth, batch);
  print_cell_head(act, depth, batch);
  std::printf("tapeless_us=%.3f steps=%zu reps=%d gflop=%.6g gflops=%.4g params=%zu loss=%.5g\n", m.us_per_step,
              m.steps, reps, flops * 1e-9, flops / (m.us_per_step * 1e-6) * 1e-9, parameter_count(depth), m.loss);
  std::fflush(stdout);
}

inline void print_skip(const char* act, std::size_t depth, std::size_t batch, const std::string& why) {
  print_cell_head(act, depth, batch);
  std::printf("tapeless_skip=\"%s\"\n", why.c_str());
  std::fflush(stdout);
}

// Empty when the cell runs; otherwise why not.
inline std::string too_slow(const options& o, std::size_t depth, std::size_t batch) {
  const double estimate = step_flops(depth, batch) / (o.assume_gflops * 1e9);
  if (estimate <= o.max_step_s) return {};
  char why[160];
  std::snprintf(why, sizeof why, "estimated %.3g s a step at %g GFLOP/s > --max-step-s %g", estimate,
                o.assume_gflops, o.max_step_s);
  return why;
}

// Runs run_cell<Depth>(act_name, act, batch) for every selected cell of this width.
template <class RunDepth>
void for_each_depth(const RunDepth& run_depth) {
  [&]<std::size_t... D>(std::index_sequence<D...>) { (run_depth(std::integral_constant<std::size_t, D>{}), ...); }(
      depths{});
}

}  // namespace grid
