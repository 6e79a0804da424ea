// Throughput of the host's float tanh alone, and of the activations built on it, over
// 4096 values (16 KiB in, 32 KiB out with the derivatives: in L1/L2, so the arithmetic,
// not memory, sets the speed). Counter values/s: inputs a second (/1e9: values per ns).
//   tanh/value                   tl::math::tanh(x)
//   tanh/value_and_derivative    what the tanh layers run: y and 1 - y^2
//   gelu/value_and_derivative    the seed fit's activation (tanh inside)
//   elu/value_and_derivative     exp and expm1 (the same reduction as tanh's)
// Inputs spread over [-range, range]: 1 (none saturated), 4 (the layers' typical
// pre-activations) and 12 (mostly saturated: tanh rounds to 1 from 9.01).
//   build/bench/micro_tanh [--benchmark_filter=value_and] [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <cstddef>

#include "run_registered.hpp"
#include "tapeless/tapeless.hpp"

namespace {

constexpr std::size_t n = 4096;

// The loop runs over local arrays, which g++ knows do not overlap (through pointers to
// heap buffers it wants a run-time alias check, and leaves gelu's loop scalar).
template <class Element>
void run(benchmark::State& state, const Element& element) {
  alignas(64) float x[n], y[n], d[n];
  tl::rng gen(3);
  for (auto& v : x) v = float(state.range(0)) * gen.symmetric<float>();
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) element(x[i], y[i], d[i]);
    benchmark::DoNotOptimize(y);
    benchmark::DoNotOptimize(d);
    benchmark::ClobberMemory();
  }
  state.counters["values/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

void tanh_value(benchmark::State& state) {
  run(state, [](float x, float& y, float&) { y = tl::math::tanh(x); });
}

template <class F>
void value_and_derivative(benchmark::State& state) {
  run(state, [](float x, float& y, float& d) { y = F{}.value_and_derivative(x, d); });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("tanh/value", tanh_value)->ArgName("range")->Arg(1)->Arg(4)->Arg(12);
  benchmark::RegisterBenchmark("tanh/value_and_derivative", value_and_derivative<tl::tanh_fn>)
      ->ArgName("range")->Arg(1)->Arg(4)->Arg(12);
  benchmark::RegisterBenchmark("gelu/value_and_derivative", value_and_derivative<tl::gelu_fn>)
      ->ArgName("range")->Arg(1)->Arg(4)->Arg(12);
  benchmark::RegisterBenchmark("elu/value_and_derivative", value_and_derivative<tl::elu_fn>)
      ->ArgName("range")->Arg(1)->Arg(4)->Arg(12);
  return bench::run_registered(argc, argv, "host float tanh over 4096 values in [-range, range]");
}
