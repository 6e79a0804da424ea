// The training API on a CUDA device: the same calls as the CPU path (train_state,
// train_step, fit, apply, value_and_grad), taking device_matrix batches. Include
// "tapeless/cuda.hpp" in a translation unit compiled by nvcc.
#pragma once

#include <thrust/device_vector.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tapeless/cpu/train.hpp"
#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/tiled.hpp"

namespace tl {

// A loss that stays in device memory until get() is called (which synchronizes).
struct device_scalar {
  const float* pointer = nullptr;
  float get() const {
    float value;
    TL_CUDA_CHECK(cudaMemcpy(&value, pointer, sizeof value, cudaMemcpyDeviceToHost));
    return value;
  }
};

namespace detail {
// An instantiated CUDA graph and what it was captured for. Copies start empty: a graph
// holds the pointers of the state that captured it.
class graph_cache {
 public:
  struct key_type {
    const float* x;
    const float* y;
    std::size_t batch, epochs;
    std::string settings;  // the bytes of the loss and optimizer objects, baked into the kernels
    bool operator==(const key_type&) const = default;
  };
  graph_cache() = default;
  graph_cache(const graph_cache&) {}
  graph_cache& operator=(const graph_cache&) { return *this; }
  ~graph_cache() { reset(); }

  bool holds(const key_type& k) const { return exec_ && key_ == k; }
  void reset() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (stream_) cudaStreamDestroy(stream_);
    exec_ = nullptr;
    stream_ = nullptr;
  }
  cudaStream_t stream() {
    if (!stream_) TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return stream_;
  }
  // Captures what `record(stream)` enqueues, instantiates it and keeps it under `k`.
  template <class Record>
  void capture(const key_type& k, Record record) {
    if (exec_) TL_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
    cudaGraph_t graph;
    TL_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    record(stream_);
    TL_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    TL_CUDA_CHECK(status);
    key_ = k;
  }
  void launch() { TL_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
  key_type key_{};
};
}  // namespace detail

template <model Model, class Optimizer>
struct cuda_train_state {
  static constexpr std::size_t P = Model::parameter_count;
  Model model;
  Optimizer optimizer;
  long step = 0;
  thrust::device_vector<float> params, optimizer_state, loss;
  thrust::device_vector<float> partials;  // per-block sums of the per-step path
  thrust::device_vector<float> history;   // loss per epoch of the running fit
  thrust::device_vector<long> failed_step = thrust::device_vector<long>(1, -1);
  // The device's copy of `step`, and the step a running fit() started from.
  thrust::device_vector<long> step_counter = thrust::device_vector<long>(2, 0);
  detail::graph_cache graph;  // the per-step path of fit(), captured once per shape
  // How the tiled path (models of more than 255 parameters) multiplies layers whose
  // widths are multiples of 16; tf32 trades precision (~1e-3) for tensor cores.
  matmul_precision precision = matmul_precision::fp32;

  cuda_train_state(Model m, const parameters<Model>& p, Optimizer opt)
      : model(m), optimizer(opt), params(p.data(), p.data() + P), optimizer_state(Optimizer::state_slots * P, 0.0f),
        loss(1, 0.0f) {}

  parameters<Model> host_params() const {
    parameters<Model> p;
    thrust::copy(params.begin(), params.end(), p.data());
    return p;
  }
};

// Moves a CPU training state (parameters, optimizer state, step) to the GPU.
template <model Model, class Optimizer>
cuda_train_state<Model, Optimizer> to_device(const train_state<Model, Optimizer>& s, const device& dev) {
  if (!dev.is_cuda()) throw shape_error("tapeless::to_device: expected a CUDA device, got " + dev.name());
  cuda_train_state<Model, Optimizer> d(s.model, s.params, s.optimizer);
  d.optimizer_state.assign(s.optimizer_state.begin(), s.optimizer_state.end());
  d.step = s.step;
  d.step_counter[0] = s.step;
  return d;
}

namespace detail {
template <model Model>
void check_device_batch(const char* where, const device_matrix& x, const device_matrix* y) {
  require_size(where, "the input rows (features of X) the model reads", Model::inputs, x.features);
  if (y) {
    require_size(where, "the target rows (features of y) the model writes", Model::outputs, y->features);
    require_size(where, "the number of target samples (the batch of X)", x.batch, y->batch);
  }
}

inline constexpr int step_threads = 256;
// Models with more gradient sums than this per thread use the tiled kernels.
inline constexpr std::size_t per_thread_gradient_limit = 256;

template <model Model>
inline constexpr bool per_thread_gradients = Model::parameter_count + 1 <= per_thread_gradient_limit;

inline int multiprocessors() {
  static const int count = [] {
    int device = 0, sms = 0;
    TL_CUDA_CHECK(cudaGetDevice(&device));
    TL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

template <model Model>
int step_blocks(std::size_t batch) {
  if constexpr (per_thread_gradients<Model>) {
    return static_cast<int>(std::min<std::size_t>((batch + step_threads - 1) / step_threads, 1024));
  } else {  // persistent blocks, each summing many tiles: one wave at 2 blocks per SM (the launch bounds)
    return static_cast<int>(std::min<std::size_t>((batch + gpu::tile - 1) / gpu::tile, 2 * multiprocessors()));
  }
}

// Grows `partials` to one row of P + 1 sums per block (outside any graph capture).
template <model Model>
int size_partials(std::size_t batch, thrust::device_vector<float>& partials) {
  const int blocks = step_blocks<Model>(batch);
  if (partials.size() < blocks * (Model::parameter_count + 1)) partials.resize(blocks * (Model::parameter_count + 1));
  return blocks;
}

template <model Model, class Loss, matmul_precision P>
void launch_tiled(const Model& model, const Loss& loss, const float* params, const device_matrix& x,
                  const device_matrix& y, int blocks, float* out, long* step_counter, cudaStream_t stream) {
  constexpr std::size_t shared = gpu::tiled_layout<Model, P>::shared_floats * sizeof(float), limit = 200 * 1024;
  static_assert(P != matmul_precision::fp32 || shared <= limit,
                "tapeless: the model's activations for one tile exceed shared memory");
  if constexpr (shared > limit) {
    throw shape_error("tapeless: matmul_precision::tf32 needs " + std::to_string(shared) +
                      " bytes of shared memory for this model, more than the " + std::to_string(limit) +
                      " available; use fp32");
  } else {
    static const bool configured = [] {
      TL_CUDA_CHECK(cudaFuncSetAttribute(gpu::tiled_partial_sums_kernel<Model, Loss, P>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
      return true;
    }();
    (void)configured;
    gpu::tiled_partial_sums_kernel<Model, Loss, P><<<blocks, gpu::tiled_threads, shared, stream>>>(
        model, loss, params, x.data(), y.data(), x.batch, out, step_counter);
    TL_CUDA_CHECK_LAUNCH("tiled_partial_sums_kernel");
  }
}

// Kernel 1 of the per-step path (per-thread or tiled, by model size); leaves one row of
// partial sums per block in `partials`. `precision` applies to the tiled path.
template <model Model, class Loss>
int launch_partials(const Model& model, const Loss& loss, const float* params, const device_matrix& x,
                    const device_matrix& y, thrust::device_vector<float>& partials, long* step_counter,
                    matmul_precision precision, cudaStream_t stream = 0) {
  constexpr std::size_t N = Model::parameter_count + 1;
  const int blocks = size_partials<Model>(x.batch, partials);
  float* out = thrust::raw_pointer_cast(partials.data());
  if constexpr (per_thread_gradients<Model>) {
    const std::size_t shared = (step_threads / gpu::warp_size) * gpu::padded_sums<N> * sizeof(float);
    gpu::partial_sums_kernel<<<blocks, step_threads, shared, stream>>>(model, loss, params, x.data(), y.data(),
                                                                       x.batch, out, step_counter);
    TL_CUDA_CHECK_LAUNCH("partial_sums_kernel");
  } else if (precision == matmul_precision::tf32) {
    launch_tiled<Model, Loss, matmul_precision::tf32>(model, loss, params, x, y, blocks, out, step_counter, stream);
  } else {
    launch_tiled<Model, Loss, matmul_precision::fp32>(model, loss, params, x, y, blocks, out, step_counter, stream);
  }
  return blocks;
}

// One fused step (two kernels) on `stream`; the loss goes to s.loss and, when
// `record_history`, to s.history (indexed from the fit's first step).
template <model Model, class Optimizer, class Loss>
void enqueue_step(cuda_train_state<Model, Optimizer>& s, const Loss& loss, const device_matrix& x,
                  const device_matrix& y, cudaStream_t stream, bool record_history) {
  float* params = thrust::raw_pointer_cast(s.params.data());
  long* counter = thrust::raw_pointer_cast(s.step_counter.data());
  const int blocks = launch_partials(s.model, loss, params, x, y, s.partials, counter, s.precision, stream);
  const float scale = static_cast<float>(1.0 / Loss::denominator(Model::outputs, x.batch));
  gpu::launch_reduce_update<Model>(thrust::raw_pointer_cast(s.partials.data()), blocks, scale,
                                   thrust::raw_pointer_cast(s.loss.data()), nullptr, s.optimizer, params,
                                   thrust::raw_pointer_cast(s.optimizer_state.data()), counter,
                                   record_history ? thrust::raw_pointer_cast(s.history.data()) : nullptr,
                                   thrust::raw_pointer_cast(s.failed_step.data()), stream);
  TL_CUDA_CHECK_LAUNCH("reduce_update_kernel");
}

inline void throw_if_failed(const thrust::device_vector<long>& failed_step, const char* where) {
  const long failed = failed_step[0];
  if (failed >= 0) {
    throw numeric_error(std::string("tapeless::") + where + ": the loss is not finite at step " +
                        std::to_string(failed + 1) + "; the parameters were left as before that step");
  }
}
}  // namespace detail

// One fused full-batch step on the GPU; no host synchronization. The returned loss
// stays on the device until .get(). A non-finite loss leaves the parameters unchanged
// and is reported (as tl::numeric_error) by the next fit() or check_finite().
template <model Model, class Optimizer, class Loss>
device_scalar train_step(cuda_train_state<Model, Optimizer>& s, const Loss& loss, const device_matrix& x,
                         const device_matrix& y) {
  detail::check_device_batch<Model>("train_step", x, &y);
  detail::enqueue_step(s, loss, x, y, 0, false);
  ++s.step;
  return {thrust::raw_pointer_cast(s.loss.data())};
}

template <model Model, class Optimizer>
void check_finite(const cuda_train_state<Model, Optimizer>& s) {
  detail::throw_if_failed(s.failed_step, "train_step");
}

struct cuda_fit_options : fit_options {
  bool one_launch = true;  // the whole loop in one kernel when the problem fits one block
  int threads = 0;         // threads of that block; 0 = one per sample, at most 256
};

// Whole-loop training. When the batch and the parameters fit one block, all epochs run
// in a single kernel launch; otherwise the fused per-step kernels, captured as a CUDA
// graph (see below).
template <model Model, class Optimizer, class Loss>
fit_result fit(cuda_train_state<Model, Optimizer>& s, const Loss& loss, const device_matrix& x,
               const device_matrix& y, std::size_t epochs, const cuda_fit_options& options = {}) {
  detail::check_device_batch<Model>("fit", x, &y);
  fit_result result;
  if (s.history.size() < epochs) s.history.resize(epochs);
  const float scale = static_cast<float>(1.0 / Loss::denominator(Model::outputs, x.batch));
  const long first_step = s.step;
  s.failed_step[0] = -1;
  const auto start = std::chrono::steady_clock::now();
  bool one_block = false;
  if constexpr (detail::per_thread_gradients<Model>) one_block = options.one_launch && x.batch <= 16384;
  if (one_block) {
    if constexpr (detail::per_thread_gradients<Model>) {  // not even instantiated for large models
      const int threads = options.threads > 0 ? (options.threads + 31) / 32 * 32
                                              : static_cast<int>(std::min<std::size_t>((x.batch + 31) / 32 * 32, 256));
      const std::size_t shared = detail::gpu::one_block_layout<Model, Optimizer>::floats(threads) * sizeof(float);
      detail::gpu::fit_one_block_kernel<<<1, threads, shared>>>(
          s.model, loss, s.optimizer, x.data(), y.data(), x.batch, scale, thrust::raw_pointer_cast(s.params.data()),
          thrust::raw_pointer_cast(s.optimizer_state.data()), s.step, static_cast<int>(epochs),
          thrust::raw_pointer_cast(s.history.data()), thrust::raw_pointer_cast(s.failed_step.data()));
      TL_CUDA_CHECK_LAUNCH("fit_one_block_kernel");
    }
  } else {
    // The fused per-step kernels, all epochs captured once as a CUDA graph and replayed
    // by later fits of the same shape. The step number lives on the device, the
    // history is indexed from it, so the graph bakes in no step.
    const long counters[2] = {first_step, first_step};
    thrust::copy(counters, counters + 2, s.step_counter.begin());
    detail::size_partials<Model>(x.batch, s.partials);  // no allocation during capture
    std::string settings(reinterpret_cast<const char*>(&loss), sizeof loss);
    settings.append(reinterpret_cast<const char*>(&s.optimizer), sizeof s.optimizer);
    settings.append(reinterpret_cast<const char*>(&s.precision), sizeof s.precision);
    const detail::graph_cache::key_type key{x.data(), y.data(), x.batch, epochs, std::move(settings)};
    if (!s.graph.holds(key)) {
      s.graph.capture(key, [&](cudaStream_t stream) {
        for (std::size_t e = 0; e < epochs; ++e) detail::enqueue_step(s, loss, x, y, stream, true);
      });
    }
    s.graph.launch();
  }
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long failed = s.failed_step[0];
  const std::size_t done = failed >= 0 ? std::size_t(failed - first_step) : epochs;
  s.step = first_step + long(done);  // steps after a non-finite loss were not applied
  s.step_counter[0] = s.step;
  result.loss_history.resize(done);
  thrust::copy(s.history.begin(), s.history.begin() + long(done), result.loss_history.begin());
  detail::throw_if_failed(s.failed_step, "fit");
  return result;
}

// The model's outputs for every sample of a device batch: (outputs, batch) on the device.
template <model Model>
device_matrix apply(const Model& model, const thrust::device_vector<float>& params, const device_matrix& x) {
  detail::check_device_batch<Model>("apply", x, nullptr);
  detail::require_size("apply", "the number of parameters", Model::parameter_count, params.size());
  device_matrix y{Model::outputs, x.batch, thrust::device_vector<float>(Model::outputs * x.batch)};
  const int blocks = static_cast<int>(std::min<std::size_t>((x.batch + 255) / 256, 4096));
  if (blocks > 0) {
    detail::gpu::apply_kernel<<<blocks, 256>>>(model, thrust::raw_pointer_cast(params.data()), x.data(), x.batch,
                                               thrust::raw_pointer_cast(y.values.data()));
    TL_CUDA_CHECK_LAUNCH("apply_kernel");
  }
  return y;
}
template <model Model, class Optimizer>
device_matrix apply(const cuda_train_state<Model, Optimizer>& s, const device_matrix& x) {
  return apply(s.model, s.params, x);
}

// Loss and gradient on the GPU, copied back (for checks and tools, not for training).
template <model Model, class Loss>
loss_and_gradient<Model> value_and_grad(const Loss& loss, const Model& model, const parameters<Model>& params,
                                        const device_matrix& x, const device_matrix& y,
                                        matmul_precision precision = matmul_precision::fp32) {
  detail::check_device_batch<Model>("value_and_grad", x, &y);
  constexpr std::size_t P = Model::parameter_count;
  thrust::device_vector<float> p(params.data(), params.data() + P), grad(P), out(1), partials;
  const int blocks =
      detail::launch_partials(model, loss, thrust::raw_pointer_cast(p.data()), x, y, partials, nullptr, precision);
  const float scale = static_cast<float>(1.0 / Loss::denominator(Model::outputs, x.batch));
  detail::gpu::launch_reduce_update<Model>(thrust::raw_pointer_cast(partials.data()), blocks, scale,
                                           thrust::raw_pointer_cast(out.data()), thrust::raw_pointer_cast(grad.data()),
                                           sgd{}, nullptr, nullptr, nullptr, nullptr, nullptr, cudaStream_t(0));
  TL_CUDA_CHECK_LAUNCH("reduce_update_kernel");
  loss_and_gradient<Model> result{out[0], parameters<Model>{}};
  thrust::copy(grad.begin(), grad.end(), result.gradient.data());
  return result;
}

}  // namespace tl
