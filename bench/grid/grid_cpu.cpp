// The benchmark grid on the CPU, one hidden width per executable (bench/grid/grid.hpp):
// per cell, full-batch Adam steps timed through tl::fit, the whole loop, as the
// median of several fits after a warm-up; one line per cell.
//   build/bench/grid_cpu_w64 [--depths 2,4,8] [--batches 1e3,1e4] [--acts tanh] [--reps 5] ...
// (bash bench/grid/run.sh cpu builds and runs them with the peers.)
#include "tapeless/tapeless.hpp"

#include "grid.hpp"

namespace {

template <class Model>
grid::measurement time_cells(const Model& model, const tl::matrix& x, const tl::matrix& y, const grid::options& o) {
  tl::rng gen(42);
  tl::train_state state(model, tl::init(model, gen), tl::adam{1e-3});
  const tl::fit_options quiet{.progress = false};
  // The warm-up: one step, which also sizes the steps of the timed fits.
  const std::size_t steps = grid::steps_for(o, tl::fit(state, tl::mse, x, y, 1, quiet).seconds);
  return grid::timed_fits(o, steps, [&](std::size_t n) { return tl::fit(state, tl::mse, x, y, n, quiet); });
}

template <std::size_t Depth, class Act>
void run_model(const grid::options& o, const char* name, const Act& act) {
  if (!grid::wanted(o.depths, Depth) || std::find(o.acts.begin(), o.acts.end(), name) == o.acts.end()) return;
  const auto model = grid::make_mlp<Depth>(act);
  for (const std::size_t batch : o.batches) {
    if (const std::string why = grid::too_slow(o, Depth, batch); !why.empty()) {
      grid::print_skip(name, Depth, batch, why);
      continue;
    }
    const tl::matrix x = grid::make_x(batch), y = grid::make_y(x);
    try {
      grid::print_measurement(name, Depth, batch, time_cells(model, x, y, o), o.reps);
    } catch (const std::exception& e) {  // a diverging fit (numeric_error) or no memory: say so, go on
      grid::print_skip(name, Depth, batch, std::string("failed: ") + e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // 20 GFLOP/s: about what the 2-core development machine reaches on mid-size cells.
  const grid::options o = grid::parse(argc, argv, 20);
  std::printf("# tapeless grid, CPU, width %zu, up to %zu threads (TAPELESS_CPU_THREADS caps them): %s\n",
              grid::width, tl::detail::cpu_thread_cap(), o.command.c_str());
  grid::for_each_depth([&](auto depth) {
    run_model<depth()>(o, "tanh", tl::tanh);
    run_model<depth()>(o, "gelu", tl::gelu);
  });
}
