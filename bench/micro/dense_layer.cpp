// One dense W -> W tanh layer on the CPU through the layer protocol (nn/layer.hpp):
// forward<16> and backward<true, 16> on one 16-lane group, as the CPU batch loop calls
// them, and Adam's update over the layer's parameters (the loop training runs).
// Counters: FLOP/s counts 2 K In Out for forward (the activation not counted) and
// 4 K In Out for backward (weight gradient and input delta); samples/s is K per call;
// for the update, parameters/s and bytes/s (Adam reads p, g, m, v and writes p, m, v).
// Backward also reads and writes its [parameter][lane] gradient, 64 W^2 bytes: past
// the caches (W >= 256 here) that traffic, not the multiply-adds, sets its speed.
//   build/bench/micro_dense [--benchmark_filter=backward] [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "run_registered.hpp"
#include "tapeless/tapeless.hpp"

namespace {

constexpr std::size_t K = 16;  // tl::detail::cpu_lanes: samples per group

// As in the CPU batch loop (cpu/batch.hpp): the group's inputs, outputs, saved
// values and deltas in local arrays, which the compiler knows do not overlap the
// heap's parameters and [parameter][lane] gradient (through plain pointers to heap
// buffers, g++ 12 leaves backward's loops scalar: 5-10x slower, not what training runs).
template <std::size_t W, class Body>
void with_layer(benchmark::State& state, const Body& body) {
  const auto layer = tl::dense<W, W>(tl::tanh);
  using layer_type = decltype(layer);
  std::vector<float> p(layer_type::parameter_count), grad(layer_type::parameter_count * K);
  alignas(64) float in[W * K], out[W * K], saved[layer_type::saved_count * K], dout[W * K], din[W * K];
  tl::rng gen(1);
  layer.init(p.data(), gen);
  for (auto& v : in) v = gen.symmetric<float>();
  // dout = 1: backward turns saved slopes into deltas in place (delta = slope * dout),
  // so with 1 the deltas stay the same call after call and never drift into denormals.
  for (auto& v : dout) v = 1.0f;
  layer.template forward<K>(p.data(), in, out, saved);
  for (auto _ : state) {
    body(layer, p.data(), in, out, saved, dout, din, grad.data());
    benchmark::DoNotOptimize(out);
    benchmark::DoNotOptimize(din);
    benchmark::DoNotOptimize(grad.data());
    benchmark::ClobberMemory();
  }
}

template <std::size_t W>
void forward(benchmark::State& state) {
  with_layer<W>(state, [](const auto& layer, const float* p, const float* in, float* out, float* saved, const float*,
                          float*, float*) { layer.template forward<K>(p, in, out, saved); });
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * K * W * W, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["samples/s"] = benchmark::Counter(double(K), benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t W>
void backward(benchmark::State& state) {
  with_layer<W>(state, [](const auto& layer, const float* p, const float* in, float* out, float* saved,
                          const float* dout, float* din, float* grad) {
    layer.template backward<true, K>(p, in, out, saved, dout, din, grad);
  });
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * K * W * W, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["samples/s"] = benchmark::Counter(double(K), benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t W>
void adam_update(benchmark::State& state) {
  constexpr std::size_t n = W * W + W;  // the layer's parameters
  std::vector<float> p(n, 0.5f), g(n, 1e-3f), moments(2 * n, 0.0f);
  const tl::adam opt{1e-3};
  long step = 0;
  for (auto _ : state) {
    tl::detail::optimizer_step(opt, ++step, p.data(), g.data(), moments.data(), n);  // what train_step calls
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  state.counters["parameters/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes/s"] = benchmark::Counter(28.0 * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}

template <std::size_t... W>
void register_widths() {
  (benchmark::RegisterBenchmark(("forward/w=" + std::to_string(W)).c_str(), forward<W>), ...);
  (benchmark::RegisterBenchmark(("backward/w=" + std::to_string(W)).c_str(), backward<W>), ...);
  (benchmark::RegisterBenchmark(("adam_update/w=" + std::to_string(W)).c_str(), adam_update<W>), ...);
}

}  // namespace

int main(int argc, char** argv) {
  register_widths<16, 32, 64, 128, 256, 512, 1024>();
  return bench::run_registered(argc, argv,
                               "one dense W->W tanh layer, 16 lanes, through tl's layer protocol; Adam update");
}
