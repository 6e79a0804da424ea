// Per-step GPU time of the layer-at-a-time path (cuda/layered.hpp) on models that do
// not fit the tiled kernels, at each precision, and an A/B of the layered and tiled
// paths on the scaled fit's 1-64-64-1 (and of the layered path's chunk size): fit() of `steps` full-batch Adam steps, tanh, MSE, median of several
// runs (CUDA events), with TFLOP/s counted as 6 * batch * In * Out per dense layer
// (forward, input delta, weight gradient).
//   build-gpu/bench/layered_fit_gpu [repetitions] [name filter: only models whose name holds it]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fit_timing.hpp"
#include "tapeless/cuda.hpp"

namespace {

const char* name_filter = nullptr;

template <class Model>
double flops_per_step(std::size_t batch) {
  double f = 0;
  [&]<std::size_t... L>(std::index_sequence<L...>) {
    ((f += 6.0 * double(batch) * Model::template layer_type<L>::inputs * Model::template layer_type<L>::outputs), ...);
  }(std::make_index_sequence<Model::depth>{});
  return f;
}

template <class Model>
void time_model(const char* name, const Model& model, std::size_t batch, int repetitions, tl::gpu_regime regime,
                std::size_t chunk_bytes = tl::detail::gpu::default_chunk_bytes,
                tl::matmul_precision precision = tl::matmul_precision::fp32) {
  if (name_filter && !std::strstr(name, name_filter)) return;
  constexpr std::size_t steps = 20;
  tl::rng gen(7);
  tl::basic_matrix<float> xh(Model::inputs, batch), yh(Model::outputs, batch);
  for (float& v : xh.values()) v = float(gen.uniform(-1, 1));
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t o = 0; o < Model::outputs; ++o) yh(o, s) = std::sin(3 * xh(0, s));
  const auto x = tl::to_device(xh), y = tl::to_device(yh);
  tl::cuda_train_state s(model, tl::init(model, gen), tl::adam{1e-3f});
  s.regime = regime;
  s.layered_chunk_bytes = chunk_bytes;
  s.precision = precision;
  const tl::cuda_train_state initial = s;
  const double median = bench::time_fits(s, initial, tl::mse, x, y, steps, repetitions).median_us_per_step;
  const char* names[] = {"fp32", "tf32", "bf16"};
  const bool layered = tl::detail::takes_layered_path<Model, float>(regime, precision);
  std::printf("%s_%s_b%zu_us %.1f   (%.2f TFLOP/s; %s)\n", name, names[int(precision)], batch, median,
              flops_per_step<Model>(batch) / (median * 1e-6) / 1e12, layered ? "layered" : "fused");
}

// A model at one precision on the path the automatic choice (or `regime`) gives it.
template <class Model>
void time_precision(const char* name, const Model& model, std::size_t batch, int repetitions,
                    tl::matmul_precision precision = tl::matmul_precision::fp32,
                    tl::gpu_regime regime = tl::gpu_regime::automatic) {
  time_model(name, model, batch, repetitions, regime, tl::detail::gpu::default_chunk_bytes, precision);
}

template <std::size_t W, std::size_t... I>
auto tanh_mlp(std::index_sequence<I...>) {  // 2 -> W, (depth - 2) x W -> W, W -> 1
  return tl::chain(tl::dense<2, W>(tl::tanh), (void(I), tl::dense<W, W>(tl::tanh))..., tl::dense<W, 1>());
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  if (argc > 2) name_filter = argv[2];
  tl::cuda_device(0);
  const auto layered = tl::gpu_regime::layered, automatic = tl::gpu_regime::automatic;
  const auto scaled = tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu), tl::dense<64, 1>());
  time_model("scaled_tiled", scaled, std::size_t(1) << 20, reps, automatic);
  for (std::size_t mb : {64, 512, 2048})
    time_model(("scaled_layered_chunk" + std::to_string(mb) + "MB").c_str(), scaled, std::size_t(1) << 20, reps,
               layered, mb << 20);
  const auto issue = tl::chain(tl::dense<2, 128>(tl::silu), tl::dense<128, 128>(tl::silu),
                               tl::dense<128, 128>(tl::silu), tl::dense<128, 1>());
  const auto all = {tl::matmul_precision::fp32, tl::matmul_precision::tf32, tl::matmul_precision::bf16};
  for (std::size_t b : {1000, 10000, 100000}) time_precision("issue_2x128x128x128x1", issue, b, reps);
  for (auto p : all) time_precision("w256_d4", tanh_mlp<256>(std::make_index_sequence<2>{}), 100000, reps, p);
  for (auto p : all) time_precision("w512_d4", tanh_mlp<512>(std::make_index_sequence<2>{}), 100000, reps, p);
  for (auto p : all) time_precision("w1024_d4", tanh_mlp<1024>(std::make_index_sequence<2>{}), 100000, reps, p);
  time_precision("w1024_d4", tanh_mlp<1024>(std::make_index_sequence<2>{}), 1000, reps);
  time_precision("w64_d16", tanh_mlp<64>(std::make_index_sequence<14>{}), 100000, reps);
  for (std::size_t b : {10000, 100000, 1000000})  // the grid's 64-8: a 64-unit fused first layer
    time_precision("w64_d8", tanh_mlp<64>(std::make_index_sequence<6>{}), b, reps);
  // Wide and shallow (a thin weight gradient over many samples), and both paths on a
  // model both can take.
  time_precision("w1024_d2", tanh_mlp<1024>(std::make_index_sequence<0>{}), 1000000, reps);
  time_precision("w512_d2", tanh_mlp<512>(std::make_index_sequence<0>{}), 1000000, reps);
  time_model("w256_d2_tiled", tanh_mlp<256>(std::make_index_sequence<0>{}), 1000000, reps, automatic);
  time_precision("w256_d2_layered", tanh_mlp<256>(std::make_index_sequence<0>{}), 1000000, reps,
                tl::matmul_precision::fp32, layered);
}
