// Where a second thread starts to pay: one loss-and-gradient pass with 1 thread and
// with 2, interleaved, median of repetitions, for models of both CPU passes over
// batches of 256 samples and up (doubling until two threads have paid, below 0.6 of
// one thread's time, twice). Prints the work of each cell in the units of the
// thresholds (the lane pass: parameter-samples, cpu/parallel.hpp; the blocked pass:
// blocked_chain's work_per_sample, cpu/batch.hpp) and the 2-thread/1-thread ratio.
//   build/bench/thread_break_even [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace {

template <tl::cpu_pass Pass, class Model>
void cells(const char* name, const Model& model, int repetitions) {
  constexpr std::size_t P = Model::parameter_count;
  // The work of a sample in the units of the pass's threshold.
  constexpr double work_per_sample = [] {
    if constexpr (Pass == tl::cpu_pass::blocked) return double(tl::detail::blocked_chain<Model, float>::work_per_sample);
    else return double(P);
  }();
  tl::rng gen(1);
  const auto params = tl::init(model, gen);
  std::vector<float> grad(P);
  int paid = 0;
  for (std::size_t batch = 256; batch <= 65536 && paid < 2; batch *= 2) {
    tl::matrix x(Model::inputs, batch), y(Model::outputs, batch);
    for (float& v : x.values()) v = float(gen.uniform() * 2 - 1);
    for (float& v : y.values()) v = float(gen.uniform() * 2 - 1);
    const auto pass = [&](std::size_t threads) {
      const auto start = std::chrono::steady_clock::now();
      tl::detail::fused_loss_and_gradient<Pass>(model, tl::mse, params.data(), x.data(), y.data(), batch, grad.data(),
                                                threads);
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<double> one, two;
    for (int r = 0; r < repetitions + 2; ++r) {
      const double a = pass(1), b = pass(2);
      if (r >= 2) one.push_back(a), two.push_back(b);  // the first two warm up
    }
    std::sort(one.begin(), one.end());
    std::sort(two.begin(), two.end());
    const double t1 = one[one.size() / 2], t2 = two[two.size() / 2];
    std::printf("%-22s %6zu samples  work %9.3g  1 thread %9.1f us  2 threads %9.1f us  ratio %.2f\n", name, batch,
                double(batch) * work_per_sample, t1, t2, t2 / t1);
    std::fflush(stdout);
    paid = t2 < 0.6 * t1 ? paid + 1 : 0;
  }
}

template <std::size_t W, std::size_t Depth>
auto mlp() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return tl::chain(tl::dense<2, W>(tl::tanh), ((void)I, tl::dense<W, W>(tl::tanh))..., tl::dense<W, 1>());
  }(std::make_index_sequence<Depth - 2>{});
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 15;
  using tl::cpu_pass;
  cells<cpu_pass::lanes>("lanes 1-16-1 (seed)", tl::chain(tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()), repetitions);
  cells<cpu_pass::lanes>("lanes 1-64-64-1", tl::chain(tl::dense<1, 64>(tl::gelu), tl::dense<64, 64>(tl::gelu),
                                                        tl::dense<64, 1>()), repetitions);
  cells<cpu_pass::blocked>("blocked 2-32-1", mlp<32, 2>(), repetitions);
  cells<cpu_pass::blocked>("blocked 2-256-1", mlp<256, 2>(), repetitions);
  cells<cpu_pass::blocked>("blocked 2-32x3-1", mlp<32, 4>(), repetitions);
  cells<cpu_pass::blocked>("blocked 2-128x3-1", mlp<128, 4>(), repetitions);
  cells<cpu_pass::blocked>("blocked 2-512x3-1", mlp<512, 4>(), repetitions);
}
