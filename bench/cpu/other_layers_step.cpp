// Per-step time on the CPU of models with other layers than dense ones (layer_norm,
// skip), through the lane pass and through the blocked pass (cpu/blocked_stages.hpp),
// side by side, with a dense chain of the same widths for scale: one full-batch
// value_and_grad of MSE, median over repetitions, the passes alternating.
//   build/bench/other_layers_step [--batches 1e3,1e4] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace {

std::vector<std::size_t> batches{1000, 10000};
int reps = 5;

template <tl::cpu_pass Pass, class Model>
double step_us(const Model& model, const tl::parameters<Model, float>& p, const tl::matrix& x, const tl::matrix& y) {
  std::vector<float> grad(Model::parameter_count);
  const auto start = std::chrono::steady_clock::now();
  tl::detail::fused_loss_and_gradient<Pass>(model, tl::mse, p.data(), x.data(), y.data(), x.batch(), grad.data());
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

template <class Model>
void time_model(const char* name, const Model& model) {
  for (const std::size_t batch : batches) {
    tl::rng gen(7);
    const auto p = tl::init(model, gen);
    tl::matrix x(Model::inputs, batch), y(Model::outputs, batch);
    for (float& v : x.values()) v = float(gen.uniform(-1, 1));
    for (float& v : y.values()) v = float(gen.uniform(-1, 1));
    std::vector<double> lanes, blocked;
    step_us<tl::cpu_pass::blocked>(model, p, x, y);  // warm: buffers, threads
    step_us<tl::cpu_pass::lanes>(model, p, x, y);
    for (int r = 0; r < reps; ++r) {
      lanes.push_back(step_us<tl::cpu_pass::lanes>(model, p, x, y));
      blocked.push_back(step_us<tl::cpu_pass::blocked>(model, p, x, y));
    }
    std::sort(lanes.begin(), lanes.end());
    std::sort(blocked.begin(), blocked.end());
    const double l = lanes[lanes.size() / 2], b = blocked[blocked.size() / 2];
    std::printf("%-32s batch %-7zu lanes %10.1f us   blocked %10.1f us   %.2fx   (by type: %s)\n", name, batch, l, b,
                l / b, tl::detail::pass_by_type<Model>() == tl::cpu_pass::blocked ? "blocked" : "lanes");
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int a = 1; a + 1 < argc; a += 2) {
    if (!std::strcmp(argv[a], "--reps")) reps = std::max(1, std::atoi(argv[a + 1]));
    else if (!std::strcmp(argv[a], "--batches")) {
      batches.clear();
      for (const char* c = argv[a + 1]; *c;) {
        char* end;
        batches.push_back(std::size_t(std::strtod(c, &end)));
        c = *end == ',' ? end + 1 : end;
        if (end == c) break;
      }
    } else {
      std::fprintf(stderr, "usage: other_layers_step [--batches 1e3,1e4] [--reps 5]\n");
      return 2;
    }
  }
  std::printf("# other_layers_step --reps %d, %zu threads\n", reps, tl::detail::cpu_pool().size());
  time_model("2-32-skip(32)-norm-1 gelu", tl::chain(tl::dense<2, 32>(tl::gelu), tl::skip(tl::dense<32, 32>(tl::gelu)),
                                                     tl::layer_norm<32>(), tl::dense<32, 1>()));
  time_model("2-128-skip(128,128)-norm-1 silu",
             tl::chain(tl::dense<2, 128>(tl::silu), tl::skip(tl::dense<128, 128>(tl::silu), tl::dense<128, 128>()),
                       tl::layer_norm<128>(), tl::dense<128, 1>()));
  time_model("2-256-norm-256-1 tanh", tl::chain(tl::dense<2, 256>(tl::tanh), tl::layer_norm<256>(),
                                                 tl::dense<256, 256>(tl::tanh), tl::dense<256, 1>()));
  time_model("2-256-skip(256)-1 tanh",
             tl::chain(tl::dense<2, 256>(tl::tanh), tl::skip(tl::dense<256, 256>(tl::tanh)), tl::dense<256, 1>()));
  time_model("2-256-256-1 tanh (dense)",
             tl::chain(tl::dense<2, 256>(tl::tanh), tl::dense<256, 256>(tl::tanh), tl::dense<256, 1>()));
}
