// One dense W -> W tanh layer on the GPU through the layer-at-a-time path's own calls
// (cuda/layer_products.hpp): forward (product, bias, tanh and its slope), backward
// (weight gradient, input delta scaled by the previous layer's slopes, with that
// layer's bias-gradient partial sums; this layer's own bias gradient comes from the next
// layer's kernel, and slice_sums_kernel, once a chunk for all layers, is not timed) for a
// batch of samples, at each precision of cuBLASLt's products (fp32, tf32, bf16), and
// the Adam update over the layer's parameters (reduce_update_kernel). The layer is the
// second of a W -> W -> W chain, so that its input and the slopes before it are real.
// Timed with CUDA events (manual time), 10 launches an iteration.
// Counters: TFLOP/s counts 2 B W^2 (forward) and 4 B W^2 (backward); for the update,
// GB/s counts Adam's traffic (reads p, the gradient, m, v; writes p, m, v).
//   build-gpu/bench/micro_dense_gpu [--benchmark_filter=backward] [--benchmark_min_time=0.1s]
#include <benchmark/benchmark.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "run_registered.hpp"
#include "tapeless/cuda.hpp"

namespace {

namespace gpu = tl::detail::gpu;
constexpr int launches = 10;
constexpr std::size_t batch = 65536;

template <std::size_t W>
auto two_layers() {
  return tl::chain(tl::dense<W, W>(tl::tanh), tl::dense<W, W>(tl::tanh));
}

// Times `launches` calls of body(stream) per iteration.
template <class Body>
void time_launches(benchmark::State& state, double flops, double bytes, Body body) {
  cudaEvent_t start, stop;
  TL_CUDA_CHECK(cudaEventCreate(&start));
  TL_CUDA_CHECK(cudaEventCreate(&stop));
  body();  // plans cuBLASLt's products, warms up
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  double seconds = 0;
  for (auto _ : state) {
    TL_CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < launches; ++i) body();
    TL_CUDA_CHECK(cudaEventRecord(stop));
    TL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms * 1e-3);
    seconds += ms * 1e-3;
  }
  const double calls = double(state.iterations()) * launches;
  if (flops > 0) state.counters["TFLOP/s"] = flops * calls / seconds / 1e12;
  if (bytes > 0) state.counters["GB/s"] = bytes * calls / seconds / 1e9;
  state.counters["us/call"] = seconds / calls * 1e6;
  TL_CUDA_CHECK(cudaEventDestroy(start));
  TL_CUDA_CHECK(cudaEventDestroy(stop));
}

template <std::size_t W>
struct layer_setup {
  using model_type = decltype(two_layers<W>());
  model_type model = two_layers<W>();
  tl::device_buffer<float> params, x;
  gpu::layered_workspace<model_type, float> ws;
  layer_setup() {
    tl::rng gen(1);
    const auto p = tl::init(model, gen);
    params.assign(p.flat().data(), p.flat().size());
    std::vector<float> xh(batch * W);
    for (float& v : xh) v = gen.symmetric<float>();
    x.assign(xh.data(), xh.size());
    // One chunk of the whole batch (the default chunk holds 32768 samples of a 1024-wide
    // pair), with bf16 copies: the calls below run all `batch` rows at once.
    ws.prepare("micro_dense_gpu", batch, std::size_t(4) << 30, true, true);
    if (ws.plan.chunk != batch) throw std::logic_error("micro_dense_gpu: the batch must be one chunk");
    // The first layer's outputs and slopes: layer 1's input and previous slopes, and
    // their bfloat16 copies (laid out as the units are) for the bf16 products.
    gpu::layered_forward<tl::matmul_precision::fp32>(model, raw(params), raw(x), batch, raw(ws.units),
                                                     static_cast<float*>(nullptr), true, ws, cudaStream_t(0));
    gpu::to_bfloat16(raw(params), params.size(), ws.low_params(), cudaStream_t(0));
    gpu::to_bfloat16(raw(ws.units), ws.units.size(), ws.template low_outputs<0>(), cudaStream_t(0));
  }
  static float* raw(tl::device_buffer<float>& v) { return v.data(); }
  float* units() { return raw(ws.units); }
  float* in() { return gpu::layer_outputs<model_type, 0>(units(), ws.plan.stride); }
  float* out() { return gpu::layer_outputs<model_type, 1>(units(), ws.plan.stride); }
  float* slope() { return gpu::layer_slopes<model_type, 1>(units(), ws.plan.stride); }
  float* previous_slope() { return gpu::layer_slopes<model_type, 0>(units(), ws.plan.stride); }
};

template <std::size_t W, tl::matmul_precision Precision>
void forward(benchmark::State& state) {
  layer_setup<W> s;
  time_launches(state, 2.0 * batch * W * W, 0, [&] {
    gpu::forward_layer<Precision, 1>(s.model, s.raw(s.params), s.in(), batch, s.out(), s.slope(), true, s.ws,
                                     cudaStream_t(0));
  });
}

template <std::size_t W, tl::matmul_precision Precision>
void backward(benchmark::State& state) {
  layer_setup<W> s;
  static_assert(!gpu::fuses_first_layer<typename layer_setup<W>::model_type>, "times layer 1's own backward");
  // The weight product on the side stream where the layered path puts it there (not at
  // this batch, today), joined inside the timing.
  const bool overlap = gpu::overlaps_weight_products(batch);
  time_launches(state, 4.0 * batch * W * W, 0, [&] {
    gpu::backward_layer<Precision, 1>(s.model, s.raw(s.params), s.raw(s.x), s.in(), s.slope(), s.previous_slope(), batch,
                                      s.raw(s.ws.gradient), false, s.ws, cudaStream_t(0),
                                      overlap ? s.ws.side.fork(cudaStream_t(0)) : cudaStream_t(0));
    if (overlap) s.ws.side.join(cudaStream_t(0));
  });
}

template <std::size_t W>
void update(benchmark::State& state) {
  using model_type = decltype(tl::chain(tl::dense<W, W>(tl::tanh)));
  gpu::layered_workspace<model_type, float> ws;
  ws.prepare("micro_dense_gpu", batch, gpu::default_chunk_bytes);
  constexpr std::size_t P = model_type::parameter_count;
  tl::device_buffer<float> params(P, 0.1f), moments(2 * P, 0.0f), loss(1);
  tl::device_buffer<long> counter(2, 0), failed(2, -1);
  ws.gradient.fill(0.01f);
  ws.loss_and_flag.fill(0.0f);
  const auto raw = [](auto& v) { return v.data(); };
  time_launches(state, 0, 7.0 * sizeof(float) * P, [&] {
    gpu::launch_reduce_update<model_type>(ws.view(), 1.0f, raw(loss), static_cast<float*>(nullptr), tl::adam{1e-3},
                                          raw(params), raw(moments), raw(counter), static_cast<float*>(nullptr),
                                          raw(failed), cudaStream_t(0));
  });
}

template <std::size_t W>
void register_width() {
  using P = tl::matmul_precision;
  const std::string w = "/W:" + std::to_string(W);
  benchmark::RegisterBenchmark(("forward/fp32" + w).c_str(), forward<W, P::fp32>)->UseManualTime();
  benchmark::RegisterBenchmark(("forward/tf32" + w).c_str(), forward<W, P::tf32>)->UseManualTime();
  benchmark::RegisterBenchmark(("forward/bf16" + w).c_str(), forward<W, P::bf16>)->UseManualTime();
  benchmark::RegisterBenchmark(("backward/fp32" + w).c_str(), backward<W, P::fp32>)->UseManualTime();
  benchmark::RegisterBenchmark(("backward/tf32" + w).c_str(), backward<W, P::tf32>)->UseManualTime();
  benchmark::RegisterBenchmark(("backward/bf16" + w).c_str(), backward<W, P::bf16>)->UseManualTime();
  benchmark::RegisterBenchmark(("update/adam" + w).c_str(), update<W>)->UseManualTime();
}

}  // namespace

int main(int argc, char** argv) {
  if (!tl::default_device().is_cuda()) {
    std::printf("no GPU: nothing to time\n");
    return 0;
  }
  register_width<16>();
  register_width<32>();
  register_width<64>();
  register_width<128>();
  register_width<256>();
  register_width<512>();
  register_width<1024>();
  return bench::run_registered(argc, argv,
                               "one dense W->W tanh layer on the layered GPU path: forward, backward (fp32, tf32, "
                               "bf16), Adam update");
}
