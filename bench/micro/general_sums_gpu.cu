// An A/B, in one run on one GPU, of the general per-step kernel's block sums
// (cuda/general_kernel.hpp, general_sums), in place: the real
// general_partial_sums_kernel, launched by the real launch_partials (training's grid
// of step_blocks blocks of general_threads and its shared memory), on real models
// that take the general path, once per variant:
//   per_entry_shuffles      the kernel's first code: 5 shuffles an entry, then rows in shared memory
//   chunked_reduce_scatter  32 entries at a time through kernels.hpp's reduce-scatter
//   cub_block_reduce        cub::BlockReduce (warp reductions) once per entry
// docs/design.md, "CUB and hand-written reductions", says why (block_sums_gpu.cu's
// BlockReduce won at P = 513 in registers; these sums live in local memory) and
// holds the numbers; the rule is that CUB replaces the hand-written sums unless they
// are measured faster here.
//   build-gpu/bench/micro_general_sums_gpu --benchmark_min_time=0.1
// (Google Benchmark 1.7 takes plain seconds and rejects "0.1s"; 1.8 takes both.)
// BM_general_sums/<variant>/P:<P>/batch:<B>: a 2-W-W-1 chain with a layer_norm after
// its first layer (P = W^2 + 7 W + 1: 295, 1111, 4021, 7999), float, mse. Times are
// per launch (the accumulation of the samples included, as in a training step): the
// mean of 20 launches replayed as one CUDA graph between two cudaEvents. Before
// timing, each variant's partial rows (every block's P gradient sums, loss sum and
// non-finite flag) are checked against per_entry_shuffles' rows, 1e-5 relative (the
// summation order differs), and a mismatch fails the benchmark (SkipWithError): no
// wrong winner.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu_timing.hpp"
#include "run_registered.hpp"
#include "tapeless/cuda.hpp"

namespace {

namespace gpu = tl::detail::gpu;
using gpu::general_sums;
using gpu_timing::guarded, gpu_timing::time_launches;
using T = float;

// The layer_norm makes it a general-path model at any width (no tiled path for it).
template <std::size_t W>
auto norm_chain() {
  return tl::chain(tl::dense<2, W>(tl::tanh), tl::layer_norm<W>(), tl::dense<W, W>(tl::tanh), tl::dense<W, 1>());
}
template <std::size_t W>
using norm_chain_t = decltype(norm_chain<W>());

// One model and batch on the device: initialised parameters, inputs in [-1, 1),
// targets sin(3 x0) x1.
template <std::size_t W>
struct problem {
  using model_type = norm_chain_t<W>;
  static constexpr std::size_t P = model_type::parameter_count;
  static_assert(tl::detail::fused_path<model_type, T> == tl::detail::gpu_path::general,
                "the A/B is of the general kernel");
  static_assert(P > tl::detail::per_thread_gradient_limit && P <= tl::detail::general_parameter_limit);
  model_type model = norm_chain<W>();
  tl::device_buffer<T> params, partials;
  tl::basic_device_matrix<T> x, y;

  explicit problem(std::size_t batch) {
    tl::rng gen(W * 1000003 + batch);
    const auto p = tl::init<T>(model, gen);
    params.assign(p.flat().data(), p.flat().size());
    tl::basic_matrix<T> hx(2, batch), hy(1, batch);
    for (T& v : hx.values()) v = gen.uniform(-1, 1);
    for (std::size_t s = 0; s < batch; ++s) hy(0, s) = std::sin(3 * hx(0, s)) * hx(1, s);
    x = tl::to_device(hx);
    y = tl::to_device(hy);
  }

  template <general_sums V>
  void launch(cudaStream_t stream) {
    tl::detail::launch_partials<V>(model, tl::mse, params.data(), x, y, partials, nullptr,
                                   tl::matmul_precision::fp32, stream);
  }

  // One launch of V into NaN-poisoned partials (an entry left unwritten fails the
  // check); the rows of all blocks, partial_row<P> values each.
  template <general_sums V>
  std::vector<T> rows() {
    const int blocks = tl::detail::size_partials<model_type, T>(x.batch(), partials);
    partials.fill(std::numeric_limits<T>::quiet_NaN());
    launch<V>(nullptr);
    TL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(std::size_t(blocks) * gpu::partial_row<P>);
    partials.copy_to(h.data(), 0, h.size());
    return h;
  }
};

// Empty where `got` matches `want` row by row: each row's gradient sums within 1e-5 of
// that row's largest, the loss sum within 1e-5 relative, the flags equal; else what is off.
template <std::size_t P>
std::string compare_rows(const std::vector<T>& got, const std::vector<T>& want) {
  constexpr std::size_t R = gpu::partial_row<P>;
  constexpr double tolerance = 1e-5;
  for (std::size_t b = 0; b * R < want.size(); ++b) {
    const T* g = got.data() + b * R;
    const T* w = want.data() + b * R;
    double scale = 0, worst = 0;
    for (std::size_t j = 0; j < P; ++j) {
      scale = std::max(scale, std::abs(double(w[j])));
      worst = std::max(worst, std::abs(double(g[j]) - double(w[j])));
    }
    const std::string where = "block " + std::to_string(b) + ": ";
    // !(a <= b): a NaN fails too.
    if (!(worst <= tolerance * scale)) return where + "gradient off by " + std::to_string(worst / scale) + " relative";
    if (!(std::abs(double(g[P]) - double(w[P])) <= tolerance * std::abs(double(w[P]))))
      return where + "loss " + std::to_string(g[P]) + ", per_entry_shuffles " + std::to_string(w[P]);
    if (!(g[P + 1] == w[P + 1])) return where + "non-finite flag " + std::to_string(g[P + 1]);
  }
  return {};
}

// The reference must be sound itself: every entry finite, no block flagged.
template <std::size_t P>
std::string check_reference(const std::vector<T>& rows) {
  constexpr std::size_t R = gpu::partial_row<P>;
  for (std::size_t k = 0; k < rows.size(); ++k)
    if (!std::isfinite(rows[k]) || (k % R == P + 1 && rows[k] != T(0)))
      return "per_entry_shuffles: block " + std::to_string(k / R) + " entry " + std::to_string(k % R) + " is " +
             std::to_string(rows[k]);
  return {};
}

template <general_sums V, std::size_t W>
void general_sums_ab(benchmark::State& state, std::size_t batch) {
  guarded(state, [&] {
    problem<W> pr(batch);
    constexpr std::size_t P = problem<W>::P;
    const std::vector<T> want = pr.template rows<general_sums::per_entry_shuffles>();
    std::string error = check_reference<P>(want);
    if (error.empty() && V != general_sums::per_entry_shuffles) error = compare_rows<P>(pr.template rows<V>(), want);
    if (!error.empty()) return state.SkipWithError(error.c_str());
    time_launches(state, 20, [&](cudaStream_t stream) { pr.template launch<V>(stream); });
    state.counters["blocks"] = double(tl::detail::step_blocks<typename problem<W>::model_type, T>(batch));
  });
}

// ---- Registration: the variants of one size side by side, so the output reads as an A/B.
template <std::size_t W, general_sums V>
void add(const char* variant, std::size_t batch) {
  const std::string name = std::string("BM_general_sums/") + variant + "/P:" +
                           std::to_string(problem<W>::P) + "/batch:" + std::to_string(batch);
  benchmark::RegisterBenchmark(name.c_str(), [batch](benchmark::State& s) { general_sums_ab<V, W>(s, batch); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

template <std::size_t W>
void register_width(std::initializer_list<std::size_t> batches) {
  for (std::size_t batch : batches) {
    add<W, general_sums::per_entry_shuffles>("per_entry_shuffles", batch);
    add<W, general_sums::chunked_reduce_scatter>("chunked_reduce_scatter", batch);
    add<W, general_sums::cub_block_reduce>("cub_block_reduce", batch);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // 30 benchmarks. 10^3 samples make 16 blocks of one sample a thread, 10^4 157 blocks,
  // 10^5 step_blocks' cap of 4 per SM (528 on the H200, ~3 samples a thread). The two
  // larger models skip 10^4, which differs from 10^3 only in the number of blocks, to
  // keep the count at 30.
  register_width<14>({1000, 10000, 100000});  // P = 295
  register_width<30>({1000, 10000, 100000});  // P = 1111
  register_width<60>({1000, 100000});         // P = 4021
  register_width<86>({1000, 100000});         // P = 7999
  return bench::run_registered(argc, argv,
                               "the general kernel's block sums: per-entry shuffles, chunked reduce-scatter, "
                               "cub::BlockReduce");
}
