// The training API on a CUDA device: the same calls as the CPU path (train_state,
// train_step, fit, apply, value_and_grad), taking device batches, in float or double.
// Include "tapeless/cuda.hpp" in a translation unit compiled by nvcc.
//
// Which kernels run is chosen from the model's type (docs/design.md, "GPU paths"):
// per-thread gradients in registers when the model has at most 255 parameters (and
// fit's whole loop in one launch of one block when the batch fits it), the tiled
// kernels for larger chains of dense layers in float whose tile fits shared memory,
// layer-at-a-time GEMMs for every other chain of dense layers (float or double), and
// the general per-thread kernel, with gradient sums in local memory, for any other
// model. cuda_train_state::regime overrides the choice.
#pragma once

#include <thrust/device_vector.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/graph_cache.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/layered.hpp"
#include "tapeless/cuda/tiled.hpp"
#include "tapeless/train/state.hpp"

namespace tl {

// A loss that stays in device memory until get() is called (which synchronizes).
template <class T = float>
struct device_scalar {
  const T* pointer = nullptr;
  T get() const {
    T value;
    TL_CUDA_CHECK(cudaMemcpy(&value, pointer, sizeof value, cudaMemcpyDeviceToHost));
    return value;
  }
};

namespace detail {
struct no_workspace {};
// The layered path's buffers, for the models it can train.
template <class Model, class T>
using layered_workspace_for =
    std::conditional_t<gpu::layered_supports<Model>, gpu::layered_workspace<Model, T>, no_workspace>;

// Parameters, optimizer state and the per-step partials, checked before allocating.
template <model Model, class Optimizer, class T>
std::size_t checked_parameter_count() {
  constexpr std::size_t P = Model::parameter_count;
  require_device_memory("cuda_train_state", sizeof(T) * P * (Optimizer::state_slots + 3),
                        "the model's " + std::to_string(P) + " parameters, their optimizer state and gradient");
  return P;
}
}  // namespace detail

template <model Model, class Optimizer, class T = float>
struct cuda_train_state {
  static_assert(check_optimizer<Optimizer>());
  static constexpr std::size_t P = Model::parameter_count;
  using model_type = Model;
  using value_type = T;
  Model model;
  Optimizer optimizer;
  long step = 0;
  thrust::device_vector<T> params, optimizer_state, loss;
  thrust::device_vector<T> partials;  // per-block sums of the per-step path
  thrust::device_vector<T> history;   // loss per epoch of the running fit
  // The step that failed (-1: none) and why: 0 the loss, 1 the gradient, was not finite.
  thrust::device_vector<long> failed = thrust::device_vector<long>(2, -1);
  // The device's copy of `step`, and the step a running fit() started from.
  thrust::device_vector<long> step_counter = thrust::device_vector<long>(2, 0);
  detail::graph_cache graph;  // the per-step path of fit(), captured once per shape
  // How the tiled path (dense chains over 255 parameters, float) multiplies layers
  // whose widths are multiples of 16; tf32 trades precision (~1e-3) for tensor cores.
  matmul_precision precision = matmul_precision::fp32;
  // Which kernels train (automatic: chosen from the model's type; see tl::gpu_regime),
  // and the layered path's activation memory per chunk of samples.
  gpu_regime regime = gpu_regime::automatic;
  std::size_t layered_chunk_bytes = std::size_t(64) << 20;
  detail::layered_workspace_for<Model, T> layered;

  cuda_train_state(Model m, const parameters<Model, T>& p, Optimizer opt)
      : model(m), optimizer(opt),
        params(p.data(), p.data() + detail::checked_parameter_count<Model, Optimizer, T>()),
        optimizer_state(Optimizer::state_slots * P, T(0)), loss(1, T(0)) {}

  parameters<Model, T> host_params() const {
    parameters<Model, T> p;
    thrust::copy(params.begin(), params.end(), p.data());
    return p;
  }
};
template <class Model, class Optimizer, class T>
cuda_train_state(Model, parameters<Model, T>, Optimizer) -> cuda_train_state<Model, Optimizer, T>;

// Moves a CPU training state (parameters, optimizer state, step) to the GPU.
template <model Model, class Optimizer, class T>
cuda_train_state<Model, Optimizer, T> to_device(const train_state<Model, Optimizer, T>& s, const device& dev) {
  if (!dev.is_cuda()) throw shape_error("tapeless::to_device: expected a CUDA device, got " + dev.name());
  cuda_train_state<Model, Optimizer, T> d(s.model, s.params, s.optimizer);
  d.optimizer_state.assign(s.optimizer_state.begin(), s.optimizer_state.end());
  d.step = s.step;
  d.step_counter[0] = s.step;
  return d;
}

namespace detail {
inline constexpr int step_threads = 256;
// Models with more gradient sums than this per thread use the tiled or general kernels.
inline constexpr std::size_t per_thread_gradient_limit = 256;
// The general kernel keeps P + 1 sums per thread in local memory: past this many
// parameters a non-dense model is refused at compile time.
inline constexpr std::size_t general_parameter_limit = 8192;
inline constexpr int general_threads = 64;

template <model Model>
inline constexpr bool per_thread_gradients = Model::parameter_count + 1 <= per_thread_gradient_limit;

// The tiled kernels keep one tile's activations in shared memory: up to this much.
inline constexpr std::size_t tiled_shared_limit = 200 * 1024;
template <model Model, class T>
constexpr bool tiled_fits() {
  if constexpr (gpu::tiled_supports<Model, T>)
    return gpu::tiled_layout<Model, matmul_precision::fp32>::shared_floats * sizeof(float) <= tiled_shared_limit;
  else return false;
}

enum class gpu_path { registers, tiled, layered, general };
template <model Model, class T>
inline constexpr gpu_path path_for = per_thread_gradients<Model>      ? gpu_path::registers
                                     : tiled_fits<Model, T>()          ? gpu_path::tiled
                                     : gpu::layered_supports<Model>    ? gpu_path::layered
                                                                       : gpu_path::general;

template <model Model, class T>
constexpr bool check_gpu_model() {
  constexpr bool fits = path_for<Model, T> != gpu_path::general || Model::parameter_count <= general_parameter_limit;
  static_assert(fits,
                "tapeless: on the GPU, a model of more than 8192 parameters must be a chain of dense layers "
                "(the tiled and layer-at-a-time kernels); this one has other layers");
  return fits;
}

// Whether a step takes the layered path under `regime`; a regime the model cannot
// take is a shape_error.
template <model Model, class T>
bool takes_layered_path(gpu_regime regime) {
  if constexpr (!gpu::layered_supports<Model>) {
    if (regime == gpu_regime::layered)
      throw shape_error("tapeless: gpu_regime::layered trains chains of dense layers only; this model is not one");
    return false;
  } else if constexpr (path_for<Model, T> == gpu_path::layered) {
    if (regime == gpu_regime::fused)
      throw shape_error("tapeless: gpu_regime::fused: this model's layers do not fit the fused kernels' shared memory "
                        "(a tile of its activations needs over 200 KB); use gpu_regime::automatic or layered");
    return true;
  } else {
    return regime == gpu_regime::layered;
  }
}

inline int multiprocessors() {
  static const int count = [] {
    int device = 0, sms = 0;
    TL_CUDA_CHECK(cudaGetDevice(&device));
    TL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

template <model Model, class T>
int step_blocks(std::size_t batch) {
  if constexpr (path_for<Model, T> == gpu_path::registers) {
    return static_cast<int>(std::min<std::size_t>((batch + step_threads - 1) / step_threads, 1024));
  } else if constexpr (path_for<Model, T> == gpu_path::tiled) {
    // persistent blocks, each summing many tiles: one wave at 2 blocks per SM (the launch bounds)
    return static_cast<int>(std::min<std::size_t>((batch + gpu::tile - 1) / gpu::tile, 2 * multiprocessors()));
  } else {
    return static_cast<int>(std::min<std::size_t>((batch + general_threads - 1) / general_threads,
                                                  4 * multiprocessors()));
  }
}

// Grows `partials` to one row per block (outside any graph capture).
template <model Model, class T>
int size_partials(std::size_t batch, thrust::device_vector<T>& partials) {
  const int blocks = step_blocks<Model, T>(batch);
  const std::size_t row = gpu::partial_row<Model::parameter_count>;
  if (partials.size() < blocks * row) partials.resize(blocks * row);
  return blocks;
}

// Raises a kernel's dynamic shared memory limit once, when it needs more than 48 KB.
template <class Kernel>
void allow_shared(Kernel kernel, std::size_t bytes) {
  if (bytes > 48 * 1024) TL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <model Model, class Loss, matmul_precision P>
void launch_tiled(const Model& model, const Loss& loss, const float* params, const device_matrix& x,
                  const device_matrix& y, int blocks, float* out, long* step_counter, cudaStream_t stream) {
  constexpr std::size_t shared = gpu::tiled_layout<Model, P>::shared_floats * sizeof(float), limit = tiled_shared_limit;
  if constexpr (shared > limit) {
    throw shape_error("tapeless: matmul_precision::tf32 needs " + std::to_string(shared) +
                      " bytes of shared memory for this model, more than the " + std::to_string(limit) +
                      " available; use fp32");
  } else {
    static const bool configured = (allow_shared(gpu::tiled_partial_sums_kernel<Model, Loss, P>, shared), true);
    (void)configured;
    gpu::tiled_partial_sums_kernel<Model, Loss, P><<<blocks, gpu::tiled_threads, shared, stream>>>(
        model, loss, params, x.data(), y.data(), x.batch(), out, step_counter);
    TL_CUDA_CHECK_LAUNCH("tiled_partial_sums_kernel");
  }
}

// Kernel 1 of the per-step path; leaves one row of partial sums per block in
// `partials`. `precision` applies to the tiled path.
template <model Model, class Loss, class T>
int launch_partials(const Model& model, const Loss& loss, const T* params, const basic_device_matrix<T>& x,
                    const basic_device_matrix<T>& y, thrust::device_vector<T>& partials, long* step_counter,
                    matmul_precision precision, cudaStream_t stream = 0) {
  constexpr std::size_t N = Model::parameter_count + 1;
  const int blocks = size_partials<Model>(x.batch(), partials);
  T* out = thrust::raw_pointer_cast(partials.data());
  if constexpr (path_for<Model, T> == gpu_path::registers) {
    const std::size_t shared = (step_threads / gpu::warp_size) * gpu::padded_sums<N> * sizeof(T);
    gpu::partial_sums_kernel<<<blocks, step_threads, shared, stream>>>(model, loss, params, x.data(), y.data(),
                                                                       x.batch(), out, step_counter);
    TL_CUDA_CHECK_LAUNCH("partial_sums_kernel");
  } else if constexpr (path_for<Model, T> == gpu_path::tiled) {
    if (precision == matmul_precision::tf32)
      launch_tiled<Model, Loss, matmul_precision::tf32>(model, loss, params, x, y, blocks, out, step_counter, stream);
    else
      launch_tiled<Model, Loss, matmul_precision::fp32>(model, loss, params, x, y, blocks, out, step_counter, stream);
  } else if constexpr (check_gpu_model<Model, T>()) {
    constexpr std::size_t shared = (general_threads / gpu::warp_size) * N * sizeof(T);
    static const bool configured = (allow_shared(gpu::general_partial_sums_kernel<Model, Loss, T>, shared), true);
    (void)configured;
    gpu::general_partial_sums_kernel<Model, Loss, T><<<blocks, general_threads, shared, stream>>>(
        model, loss, params, x.data(), y.data(), x.batch(), out, step_counter);
    TL_CUDA_CHECK_LAUNCH("general_partial_sums_kernel");
  }
  return blocks;
}

template <class T, model Model, class Loss>
T loss_scale(std::size_t batch) {
  return static_cast<T>(1.0 / Loss::denominator(Model::outputs, batch));
}

// What reduce_update_kernel writes after a step's sums: the loss, and either the
// gradient (`grad`) or the optimizer's update of `params` (with its state, the step
// counter, the loss history and the failure record).
template <class Optimizer, class T>
struct step_output {
  T* loss;
  T* grad = nullptr;
  Optimizer optimizer{};
  T* params = nullptr;
  T* state = nullptr;
  long* counter = nullptr;
  T* history = nullptr;
  long* failed = nullptr;
};

// Buffers sized for x's batch before a step is enqueued (never during a graph capture).
template <model Model, class T>
void prepare_step(const char* where, std::size_t batch, bool layered, thrust::device_vector<T>& partials,
                  layered_workspace_for<Model, T>& workspace, std::size_t chunk_bytes) {
  if constexpr (gpu::layered_supports<Model>) {
    if (layered) return workspace.prepare(where, batch, chunk_bytes, multiprocessors());
  }
  if constexpr (path_for<Model, T> != gpu_path::layered) size_partials<Model, T>(batch, partials);
}

// One step's gradient sums on `stream` (the per-sample kernels, or the layered path's
// GEMMs), then reduce_update_kernel; `params` are read, and updated when out.params is.
template <model Model, class Loss, class T, class Optimizer>
void enqueue_gradient(const Model& model, const Loss& loss, const T* params, const basic_device_matrix<T>& x,
                      const basic_device_matrix<T>& y, bool layered, thrust::device_vector<T>& partials,
                      layered_workspace_for<Model, T>& workspace, matmul_precision precision,
                      const step_output<Optimizer, T>& out, cudaStream_t stream) {
  const T scale = loss_scale<T, Model, Loss>(x.batch());
  const auto reduce = [&](const auto& view) {
    gpu::launch_reduce_update<Model>(view, scale, out.loss, out.grad, out.optimizer, out.params, out.state,
                                     out.counter, out.history, out.failed, stream);
    TL_CUDA_CHECK_LAUNCH("reduce_update_kernel");
  };
  if constexpr (gpu::layered_supports<Model>) {
    if (layered) {
      gpu::layered_partial_sums(model, loss, params, x.data(), y.data(), x.batch(), workspace, out.counter, stream);
      return reduce(workspace.view());
    }
  }
  if constexpr (path_for<Model, T> != gpu_path::layered) {
    const int blocks = launch_partials(model, loss, params, x, y, partials, out.counter, precision, stream);
    reduce(gpu::block_partials<Model::parameter_count, T>{thrust::raw_pointer_cast(partials.data()), blocks});
  }
}

// One training step of s on `stream`; the loss goes to s.loss and, when
// `record_history`, to s.history (indexed from the fit's first step).
template <model Model, class Optimizer, class T, class Loss>
void enqueue_step(cuda_train_state<Model, Optimizer, T>& s, const Loss& loss, const basic_device_matrix<T>& x,
                  const basic_device_matrix<T>& y, cudaStream_t stream, bool record_history) {
  T* params = thrust::raw_pointer_cast(s.params.data());
  const step_output<Optimizer, T> out{thrust::raw_pointer_cast(s.loss.data()),
                                      nullptr,
                                      s.optimizer,
                                      params,
                                      thrust::raw_pointer_cast(s.optimizer_state.data()),
                                      thrust::raw_pointer_cast(s.step_counter.data()),
                                      record_history ? thrust::raw_pointer_cast(s.history.data()) : nullptr,
                                      thrust::raw_pointer_cast(s.failed.data())};
  enqueue_gradient(s.model, loss, params, x, y, takes_layered_path<Model, T>(s.regime), s.partials, s.layered,
                   s.precision, out, stream);
}

template <model Model, class Optimizer, class T>
void prepare_step(const char* where, cuda_train_state<Model, Optimizer, T>& s, std::size_t batch) {
  prepare_step<Model, T>(where, batch, takes_layered_path<Model, T>(s.regime), s.partials, s.layered,
                         s.layered_chunk_bytes);
}

inline std::string failure_message(const char* where, long step, long kind) {
  return std::string("tapeless::") + where + ": the " + (kind == 1 ? "gradient" : "loss") +
         " is not finite at step " + std::to_string(step + 1) + "; the parameters were left as before that step";
}
}  // namespace detail

// One fused full-batch step on the GPU; no host synchronization. The returned loss
// stays on the device until .get(). A non-finite loss or gradient leaves the
// parameters unchanged and is reported (as tl::numeric_error) by the next fit() or
// check_finite().
template <model Model, class Optimizer, class T, class Loss>
device_scalar<T> train_step(cuda_train_state<Model, Optimizer, T>& s, const Loss& loss,
                            const basic_device_matrix<T>& x, const basic_device_matrix<T>& y) {
  static_assert(check_loss<Loss>() || true);  // the check reports itself
  detail::check_batch<Model>("train_step", x, &y);
  detail::prepare_step("train_step", s, x.batch());
  detail::enqueue_step(s, loss, x, y, 0, false);
  ++s.step;
  return {thrust::raw_pointer_cast(s.loss.data())};
}

template <model Model, class Optimizer, class T>
void check_finite(const cuda_train_state<Model, Optimizer, T>& s) {
  const std::vector<long> failed(s.failed.begin(), s.failed.end());
  if (failed[0] >= 0) throw numeric_error(detail::failure_message("train_step", failed[0], failed[1]));
}

struct cuda_fit_options : fit_options {
  bool one_launch = true;  // the whole loop in one kernel when the problem fits one block
  int threads = 0;         // threads of that block; 0 = one per sample, at most 256
};

// Whole-loop training. When the batch and the parameters fit one block, all epochs run
// in a single kernel launch; otherwise the fused per-step kernels, all epochs captured
// once as a CUDA graph and replayed by later fits of the same shape: the step number
// lives on the device and the history is indexed from it, so the graph bakes in no
// step. A failure throws numeric_error carrying the losses of the steps before it.
template <model Model, class Optimizer, class T, class Loss>
fit_result fit(cuda_train_state<Model, Optimizer, T>& s, const Loss& loss, const basic_device_matrix<T>& x,
               const basic_device_matrix<T>& y, std::size_t epochs, const cuda_fit_options& options = {}) {
  static_assert(check_loss<Loss>() || true);  // the check reports itself
  detail::check_batch<Model>("fit", x, &y);
  fit_result result;
  if (s.history.size() < epochs) s.history.resize(epochs);
  const long first_step = s.step;
  thrust::fill(s.failed.begin(), s.failed.end(), -1L);
  const auto start = std::chrono::steady_clock::now();
  bool one_block = false;
  if constexpr (detail::per_thread_gradients<Model>) one_block = options.one_launch && x.batch() <= 16384;
  if (one_block) {
    if constexpr (detail::per_thread_gradients<Model>) {  // not even instantiated for large models
      using layout = detail::gpu::one_block_layout<Model, Optimizer, T>;
      const int threads = options.threads > 0 ? (options.threads + 31) / 32 * 32
                                              : static_cast<int>(std::min<std::size_t>((x.batch() + 31) / 32 * 32, 256));
      const std::size_t shared = layout::values(threads) * sizeof(T);
      static const bool configured =
          (detail::allow_shared(detail::gpu::fit_one_block_kernel<Model, Loss, Optimizer, T>, 160 * 1024), true);
      (void)configured;
      detail::gpu::fit_one_block_kernel<<<1, threads, shared>>>(
          s.model, loss, s.optimizer, x.data(), y.data(), x.batch(), detail::loss_scale<T, Model, Loss>(x.batch()),
          thrust::raw_pointer_cast(s.params.data()), thrust::raw_pointer_cast(s.optimizer_state.data()), s.step,
          static_cast<int>(epochs), thrust::raw_pointer_cast(s.history.data()),
          thrust::raw_pointer_cast(s.failed.data()));
      TL_CUDA_CHECK_LAUNCH("fit_one_block_kernel");
    }
  } else {
    const long counters[2] = {first_step, first_step};
    thrust::copy(counters, counters + 2, s.step_counter.begin());
    detail::prepare_step("fit", s, x.batch());  // no allocation during capture
    std::string settings(reinterpret_cast<const char*>(&loss), sizeof loss);
    settings.append(reinterpret_cast<const char*>(&s.optimizer), sizeof s.optimizer);
    settings.append(reinterpret_cast<const char*>(&s.precision), sizeof s.precision);
    settings.append(reinterpret_cast<const char*>(&s.regime), sizeof s.regime);
    settings.append(reinterpret_cast<const char*>(&s.layered_chunk_bytes), sizeof s.layered_chunk_bytes);
    const detail::graph_cache::key_type key{x.data(), y.data(), x.batch(), epochs, std::move(settings)};
    if (!s.graph.holds(key)) {
      s.graph.capture(key, [&](cudaStream_t stream) {
        for (std::size_t e = 0; e < epochs; ++e) detail::enqueue_step(s, loss, x, y, stream, true);
      });
    }
    s.graph.launch();
  }
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<long> failed(s.failed.begin(), s.failed.end());
  const std::size_t done = failed[0] >= 0 ? std::size_t(failed[0] - first_step) : epochs;
  s.step = first_step + long(done);  // steps after a non-finite loss or gradient were not applied
  s.step_counter[0] = s.step;
  std::vector<T> history(done);
  thrust::copy(s.history.begin(), s.history.begin() + long(done), history.begin());
  result.loss_history.assign(history.begin(), history.end());
  if (failed[0] >= 0)
    throw numeric_error(detail::failure_message("fit", failed[0], failed[1]), std::move(result.loss_history));
  return result;
}

// The model's outputs for every sample of a device batch: (outputs, batch) on the device.
template <model Model, class T>
basic_device_matrix<T> apply(const Model& model, const thrust::device_vector<T>& params,
                             const basic_device_matrix<T>& x, gpu_regime regime = gpu_regime::automatic,
                             std::size_t layered_chunk_bytes = std::size_t(64) << 20) {
  detail::check_batch<Model>("apply", x);
  detail::require_size("apply", "the number of parameters", Model::parameter_count, params.size());
  basic_device_matrix<T> y{Model::outputs, x.batch(), thrust::device_vector<T>(Model::outputs * x.batch())};
  if constexpr (detail::gpu::layered_supports<Model>) {
    if (detail::takes_layered_path<Model, T>(regime)) {
      detail::gpu::layered_workspace<Model, T> workspace;
      workspace.prepare("apply", x.batch(), layered_chunk_bytes, detail::multiprocessors());
      detail::gpu::layered_apply(model, thrust::raw_pointer_cast(params.data()), x.data(), x.batch(), y.data(),
                                 workspace);
      return y;
    }
  }
  if constexpr (detail::path_for<Model, T> != detail::gpu_path::layered) {
    const int blocks = static_cast<int>(std::min<std::size_t>((x.batch() + 255) / 256, 4096));
    detail::gpu::apply_kernel<<<blocks, 256>>>(model, thrust::raw_pointer_cast(params.data()), x.data(), x.batch(),
                                               y.data());
    TL_CUDA_CHECK_LAUNCH("apply_kernel");
  }
  return y;
}
template <model Model, class Optimizer, class T>
basic_device_matrix<T> apply(const cuda_train_state<Model, Optimizer, T>& s, const basic_device_matrix<T>& x) {
  return apply(s.model, s.params, x, s.regime, s.layered_chunk_bytes);
}

// Loss and gradient on the GPU, copied back (for checks and tools, not for training).
template <class Loss, model Model, class T>
loss_and_gradient<Model, T> value_and_grad(const Loss& loss, const Model& model, const parameters<Model, T>& params,
                                           const basic_device_matrix<T>& x, const basic_device_matrix<T>& y,
                                           matmul_precision precision = matmul_precision::fp32,
                                           gpu_regime regime = gpu_regime::automatic,
                                           std::size_t layered_chunk_bytes = std::size_t(64) << 20) {
  static_assert(check_loss<Loss>() || true);  // the check reports itself
  detail::check_batch<Model>("value_and_grad", x, &y);
  constexpr std::size_t P = Model::parameter_count;
  thrust::device_vector<T> p(params.data(), params.data() + P), grad(P), out(1), partials;
  detail::layered_workspace_for<Model, T> workspace;
  const bool layered = detail::takes_layered_path<Model, T>(regime);
  detail::prepare_step<Model, T>("value_and_grad", x.batch(), layered, partials, workspace, layered_chunk_bytes);
  detail::step_output<sgd, T> result_at{thrust::raw_pointer_cast(out.data()), thrust::raw_pointer_cast(grad.data())};
  detail::enqueue_gradient(model, loss, thrust::raw_pointer_cast(p.data()), x, y, layered, partials, workspace,
                           precision, result_at, cudaStream_t(0));
  loss_and_gradient<Model, T> result{out[0], parameters<Model, T>{}};
  thrust::copy(grad.begin(), grad.end(), result.gradient.data());
  return result;
}

}  // namespace tl
