// Per-step time of models with other layers than dense ones (layer_norm, skip): on the
// GPU the path the automatic choice takes (the layered path with their stages past
// 8192 parameters, cuda/layered_stages.hpp; below, the general kernel), and on this
// host's CPU the pass it takes; a dense chain of the same widths beside them.
// fit() of `steps` full-batch Adam steps, MSE, median of several runs (CUDA events on
// the GPU, the CPU fit's own clock).
//   build-gpu/bench/other_layers_fit_gpu [repetitions] [--no-cpu]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fit_timing.hpp"
#include "tapeless/cuda.hpp"

namespace {

bool run_cpu = true;

template <class Model>
void time_model(const char* name, const Model& model, std::size_t batch, int repetitions) {
  constexpr std::size_t steps = 10;
  tl::rng gen(7);
  tl::basic_matrix<float> xh(Model::inputs, batch), yh(Model::outputs, batch);
  for (float& v : xh.values()) v = float(gen.uniform(-1, 1));
  for (std::size_t s = 0; s < batch; ++s) yh(0, s) = std::sin(3 * xh(0, s)) * xh(1, s);
  const auto params = tl::init(model, gen);
  const auto x = tl::to_device(xh), y = tl::to_device(yh);
  tl::cuda_train_state s(model, params, tl::adam{1e-3f});
  const tl::cuda_train_state initial = s;
  const auto gpu = bench::time_fits(s, initial, tl::mse, x, y, steps, repetitions);
  const bool layered = tl::detail::takes_layered_path<Model, float>(s.regime, s.precision);
  std::printf("%-34s P=%-6zu batch %-7zu GPU %10.1f us/step (%s)", name, Model::parameter_count, batch,
              gpu.median_us_per_step,
              layered ? "layered" : tl::detail::general_sums_in_rows<Model> ? "general, rows" : "fused");
  if (run_cpu) {
    std::vector<double> per_step;
    for (int r = 0; r < std::max(1, repetitions / 2); ++r) {
      tl::train_state c(model, params, tl::adam{1e-3f});
      per_step.push_back(tl::fit(c, tl::mse, xh, yh, steps, {.progress = false}).seconds * 1e6 / steps);
    }
    std::sort(per_step.begin(), per_step.end());
    const double cpu = per_step[per_step.size() / 2];
    std::printf("   CPU %10.1f us/step   CPU/GPU %.1fx", cpu, cpu / gpu.median_us_per_step);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  for (int a = 2; a < argc; ++a) run_cpu = run_cpu && std::strcmp(argv[a], "--no-cpu") != 0;
  std::printf("# build-gpu/bench/other_layers_fit_gpu %d%s\n", repetitions, run_cpu ? "" : " --no-cpu");
  const auto residual = tl::chain(tl::dense<2, 128>(tl::silu), tl::skip(tl::dense<128, 128>(tl::silu), tl::dense<128, 128>()),
                                  tl::layer_norm<128>(), tl::dense<128, 1>());
  const auto normed = tl::chain(tl::dense<2, 256>(tl::tanh), tl::layer_norm<256>(), tl::dense<256, 256>(tl::tanh),
                                tl::dense<256, 1>());
  const auto skipped = tl::chain(tl::dense<2, 256>(tl::tanh), tl::skip(tl::dense<256, 256>(tl::tanh)), tl::dense<256, 1>());
  const auto small = tl::chain(tl::dense<2, 32>(tl::gelu), tl::skip(tl::dense<32, 32>(tl::gelu)), tl::layer_norm<32>(),
                               tl::dense<32, 1>());
  const auto dense = tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 256>(tl::tanh), tl::dense<256, 1>());
  for (std::size_t batch : {1000u, 10000u, 100000u}) {
    time_model("2-32-skip(32)-norm-1 gelu", small, batch, repetitions);
    time_model("2-128-skip(128,128)-norm-1 silu", residual, batch, repetitions);
    time_model("2-256-norm-256-1 tanh", normed, batch, repetitions);
    time_model("2-256-skip(256)-1 tanh", skipped, batch, repetitions);
    time_model("2-256-256-1 tanh (dense)", dense, batch, repetitions);
  }
}
