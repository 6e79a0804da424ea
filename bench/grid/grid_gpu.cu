// The benchmark grid on the GPU (nvcc), one hidden width per executable
// (bench/grid/grid.hpp): per cell, full-batch Adam steps timed through tl::fit on
// device batches, the whole loop (one launch for small models, else the per-step
// kernels replayed as a CUDA graph), as the median of several fits after a warm-up
// fit of the same length; one line per cell.
//   build-gpu/bench/grid_gpu_w64 [--depths 2,4,8] [--batches 1e3,1e6] [--acts tanh] [--reps 5] ...
// (bash bench/grid/run.sh gpu builds and runs them with the peers.)
// GRID_REGIME=layered (or fused) forces that path (tl::gpu_regime) on every cell, for
// an A/B of the automatic choice; GRID_PRECISION=tf32 (or bf16) sets the products'
// precision (tl::matmul_precision; fp32 by default), to compare with JAX's default,
// which multiplies in TF32. The header line names both.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tapeless/cuda.hpp"

#include "grid.hpp"

namespace {

tl::gpu_regime forced_regime() {
  const char* env = std::getenv("GRID_REGIME");
  if (env && std::strcmp(env, "layered") == 0) return tl::gpu_regime::layered;
  if (env && std::strcmp(env, "fused") == 0) return tl::gpu_regime::fused;
  return tl::gpu_regime::automatic;
}

const char* const precision_names[] = {"fp32", "tf32", "bf16"};
tl::matmul_precision chosen_precision() {
  const char* env = std::getenv("GRID_PRECISION");
  if (!env) return tl::matmul_precision::fp32;
  for (int p = 0; p < 3; ++p)
    if (std::strcmp(env, precision_names[p]) == 0) return tl::matmul_precision(p);
  std::fprintf(stderr, "GRID_PRECISION=%s: expected fp32, tf32 or bf16\n", env);
  std::exit(2);
}

template <class Model>
grid::measurement time_cells(const Model& model, const tl::device_matrix& x, const tl::device_matrix& y,
                             const grid::options& o) {
  tl::rng gen(42);
  tl::cuda_train_state state(model, tl::init(model, gen), tl::adam{1e-3});
  state.regime = forced_regime();
  state.precision = chosen_precision();
  // Two probe fits of 2 steps (the first captures a graph of that length), then a
  // warm-up fit of the timed length, which captures the graph the timed fits replay.
  tl::fit(state, tl::mse, x, y, 2);
  const std::size_t steps = grid::steps_for(o, tl::fit(state, tl::mse, x, y, 2).seconds / 2);
  tl::fit(state, tl::mse, x, y, steps);
  // A fit's seconds end after a device synchronization.
  return grid::timed_fits(o, steps, [&](std::size_t n) { return tl::fit(state, tl::mse, x, y, n); });
}

template <std::size_t Depth, class Act>
void run_model(const grid::options& o, const char* name, const Act& act) {
  if (!grid::wanted(o.depths, Depth) || std::find(o.acts.begin(), o.acts.end(), name) == o.acts.end()) return;
  for (const std::size_t batch : o.batches) {
    if (const std::string why = grid::too_slow(o, Depth, batch); !why.empty()) {
      grid::print_skip(name, Depth, batch, why);
      continue;
    }
    try {
      const tl::matrix hx = grid::make_x(batch), hy = grid::make_y(hx);
      const tl::device_matrix x = hx | tl::cuda_device(), y = hy | tl::cuda_device();
      grid::print_measurement(name, Depth, batch, time_cells(grid::make_mlp<Depth>(act), x, y, o), o.reps);
    } catch (const std::exception& e) {  // a diverging fit, no memory: say so, go on
      grid::print_skip(name, Depth, batch, std::string("failed: ") + e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // 20 TFLOP/s: between the small cells' rate and the fp32 peak (about 67).
  const grid::options o = grid::parse(argc, argv, 20000);
  tl::device dev;
  try {
    dev = tl::cuda_device(0);
  } catch (const tl::cuda_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  cudaDeviceProp prop;
  TL_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev.index));
  const char* regimes[] = {"automatic", "fused", "layered"};
  std::printf("# tapeless grid, GPU %s, width %zu, %s path, %s products: %s\n", prop.name, grid::width,
              regimes[int(forced_regime())], precision_names[int(chosen_precision())], o.command.c_str());
  grid::for_each_depth([&](auto depth) {
    run_model<depth()>(o, "tanh", tl::tanh);
    run_model<depth()>(o, "gelu", tl::gelu);
  });
}
