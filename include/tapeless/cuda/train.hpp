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

#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "tapeless/core/finite.hpp"
#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/graph_cache.hpp"
#include "tapeless/cuda/launch_size.hpp"
#include "tapeless/cuda/step.hpp"
#include "tapeless/train/progress.hpp"
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
  // `float loss = tl::train_step(gpu_state, ...)`, as on the CPU: an error that names
  // .get(), not "no suitable conversion".
  template <class U>
    requires std::is_arithmetic_v<U>
  operator U() const {
    static_assert(sizeof(U) == 0, "tapeless: the GPU train_step's loss stays on the device (no wait for the "
                                  "step): read it with .get(), e.g. float loss = tl::train_step(s, loss, x, y).get()");
    return {};
  }
};

template <model Model, class Optimizer, class T = float>
struct cuda_train_state {
  static_assert(check_optimizer<Optimizer>());
  static constexpr std::size_t P = Model::parameter_count;
  using model_type = Model;
  using value_type = T;
  Model model;
  Optimizer optimizer;
  long step = 0;
  device_buffer<T> params, optimizer_state, loss;
  device_buffer<T> partials;  // per-block sums of the per-step path
  device_buffer<T> history;   // loss per epoch of the running fit
  // The step that failed (-1: none) and why: 0 the loss, 1 the gradient, was not finite.
  device_buffer<long> failed = device_buffer<long>(2, -1L);
  // The device's copy of `step`, and the step a running fit() started from.
  device_buffer<long> step_counter = device_buffer<long>(2);
  detail::graph_cache graph;  // the per-step path of fit(): its two graphs, captured once per shape
  // How the tiled path (dense chains over 255 parameters, float) multiplies layers
  // whose widths are multiples of 16; tf32 trades precision (~1e-3) for tensor cores.
  matmul_precision precision = matmul_precision::fp32;
  // Which kernels train (automatic: chosen from the model's type; see tl::gpu_regime),
  // and the layered path's activation memory per chunk of samples.
  gpu_regime regime = gpu_regime::automatic;
  std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes;
  detail::layered_workspace_for<Model, T> layered;

  cuda_train_state(Model m, const parameters<Model, T>& p, Optimizer opt)
      : model(m), optimizer(opt),
        params(p.data(), detail::checked_parameter_count<Model, Optimizer, T>()),
        optimizer_state(Optimizer::state_slots * P), loss(1) {}

  parameters<Model, T> host_params() const {
    parameters<Model, T> p;
    params.copy_to(p.data());
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
  d.optimizer_state.assign(s.optimizer_state.data(), s.optimizer_state.size());
  d.step = s.step;
  d.step_counter.set(0, s.step);
  return d;
}

namespace detail {

// One training step of s on `stream`; the loss goes to s.loss and, when
// `record_history`, to s.history (indexed from the fit's first step).
template <model Model, class Optimizer, class T, class Loss>
void enqueue_step(cuda_train_state<Model, Optimizer, T>& s, const Loss& loss, const basic_device_matrix<T>& x,
                  const basic_device_matrix<T>& y, cudaStream_t stream, bool record_history) {
  T* params = s.params.data();
  const step_output<Optimizer, T> out{s.loss.data(),
                                      nullptr,
                                      s.optimizer,
                                      params,
                                      s.optimizer_state.data(),
                                      s.step_counter.data(),
                                      record_history ? s.history.data() : nullptr,
                                      s.failed.data()};
  enqueue_gradient(s.model, loss, params, x, y, takes_layered_path<Model, T>(s.regime, s.precision), s.partials,
                   s.layered, s.precision, out, stream);
}

template <model Model, class Optimizer, class T>
void prepare_step(const char* where, cuda_train_state<Model, Optimizer, T>& s, std::size_t batch) {
  prepare_step<Model, T>(where, batch, takes_layered_path<Model, T>(s.regime, s.precision), s.partials, s.layered,
                         s.layered_chunk_bytes, s.precision);
}

inline std::string failure_message(const char* where, long step, long kind, const std::string& cause = {}) {
  return std::string("tapeless::") + where + ": the " + (kind == 1 ? "gradient" : "loss") +
         " is not finite at step " + std::to_string(step + 1) + cause +
         "; the parameters were left as before that step";
}

// The least index of a NaN or infinity in values[0, count) into *least (left as it
// was when there is none): every thread that finds one takes the minimum, which any
// order of the atomics gives alike. (It was thrust::transform_reduce with a minimum,
// whose 32- and 64-bit dispatch instantiated four CUB reduction kernels in every GPU
// program for a search that runs only once a step has failed.)
template <class T>
__global__ void least_non_finite_kernel(const T* values, std::size_t count, unsigned long long* least) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (!isfinite(values[i])) atomicMin(least, static_cast<unsigned long long>(i));
}
// The least index of a NaN or infinity in values[0, count) on the device; count if none.
template <class T>
std::size_t least_non_finite(const T* values, std::size_t count) {
  constexpr unsigned long long none = ~0ull;
  device_buffer<unsigned long long> least(1, none);
  least_non_finite_kernel<<<gpu::grid_stride_blocks(count), 256>>>(values, count,
                                                                    least.data());
  TL_CUDA_CHECK_LAUNCH("least_non_finite_kernel");
  const unsigned long long at = least.get(0);  // (waits for the kernel)
  return at < count ? std::size_t(at) : count;
}

// As the CPU's message says it (cpu/train.hpp's non_finite_cause): " (x holds NaN at
// feature 0 of sample 7)", else where the parameters hold one, or empty. Searched on
// the device, only once a step has failed; x and y may be absent (train_step's check
// has only the state). A search that fails itself (no memory for its one value) gives
// up the hint, never the numeric_error and its loss history.
template <class T>
std::string non_finite_cause(const basic_device_matrix<T>* x, const basic_device_matrix<T>* y,
                             const device_buffer<T>& params, bool initial) try {
  for (const auto* m : {x, y}) {
    if (!m) continue;
    const std::size_t count = m->values.size(), at = least_non_finite(m->data(), count);
    if (at < count) return non_finite_sample(m == x ? "x" : "y", double(m->values.get(at)), at, m->features());
  }
  const std::size_t at = least_non_finite(params.data(), params.size());
  if (at < params.size()) return non_finite_parameter(double(params.get(at)), at, initial);
  return {};
} catch (const std::exception&) {
  return {};
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
  detail::check_settings(s.optimizer);
  detail::prepare_step("train_step", s, x.batch());
  detail::enqueue_step(s, loss, x, y, 0, false);
  ++s.step;
  return {s.loss.data()};
}

template <model Model, class Optimizer, class T>
void check_finite(const cuda_train_state<Model, Optimizer, T>& s) {
  const std::vector<long> failed = s.failed.to_host();
  if (failed[0] >= 0)
    throw numeric_error(detail::failure_message("train_step", failed[0], failed[1],
                                                detail::non_finite_cause<T>(nullptr, nullptr, s.params,
                                                                            failed[0] == 0)));
}

// fit_options' fields and the GPU's own, in one aggregate so that designated
// initializers reach all of them ({.progress = true, .one_launch = false}). The GPU
// runs all epochs in one launch or in replayed graphs, so progress, off by default, is
// reported after the run: the lines the CPU's fit prints every `log_every` epochs.
struct cuda_fit_options {
  bool progress = false;
  std::size_t log_every = 0;  // epochs between lines; 0 = a tenth of the run
  bool one_launch = true;     // the whole loop in one kernel when the problem fits one block
  int threads = 0;            // threads of that block; 0 = one per sample, at most 256
};

// Whole-loop training. When the batch and the parameters fit one block, all epochs run
// in a single kernel launch; otherwise the fused per-step kernels, graph_steps of them
// captured once as a CUDA graph and replayed as often as the epochs need (the rest in
// a second graph), by this fit and later ones of the same shape: the step number lives
// on the device and the history is indexed from it, so a graph bakes in no step. (A
// graph of every epoch grew with the epochs: 10^5 of them, about 10^6 nodes to capture
// and instantiate.) A failure throws numeric_error carrying the losses of the steps
// before it.
namespace detail {
inline constexpr std::size_t graph_steps = 128;
}  // namespace detail
template <model Model, class Optimizer, class T, class Loss>
fit_result fit(cuda_train_state<Model, Optimizer, T>& s, const Loss& loss, const basic_device_matrix<T>& x,
               const basic_device_matrix<T>& y, std::size_t epochs, const cuda_fit_options& options = {}) {
  static_assert(check_loss<Loss>() || true);  // the check reports itself
  detail::check_batch<Model>("fit", x, &y);
  detail::check_settings(s.optimizer);
  detail::check_epochs("fit", epochs);
  fit_result result;
  if (s.history.size() < epochs) s.history.resize(epochs);
  const long first_step = s.step;
  // Synchronous on the default stream: it also waits for what was enqueued there
  // before (a samples_into cut), which the graphs' own stream would not.
  s.failed.fill(-1L);
  const auto start = std::chrono::steady_clock::now();
  // A regime or precision the model cannot take is an error at every batch size, before
  // the one-launch kernel (which has no regime) could be chosen for a small one.
  const bool layered = detail::takes_layered_path<Model, T>(s.regime, s.precision);
  if (epochs == 0) return result;
  const bool one_block_forced = detail::one_block_forced_by_environment();  // a bad value: an error every fit
  bool one_block = false;
  if constexpr (detail::per_thread_gradients<Model>)
    one_block = !layered && options.one_launch && (detail::one_block_fits<Model>(x.batch()) || one_block_forced);
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
          s.params.data(), s.optimizer_state.data(), s.step,
          static_cast<int>(epochs), s.history.data(),
          s.failed.data());
      TL_CUDA_CHECK_LAUNCH("fit_one_block_kernel");
    }
  } else {
    const long counters[2] = {first_step, first_step};
    s.step_counter.assign(counters, 2);
    detail::prepare_step("fit", s, x.batch());  // no allocation during capture
    std::string settings(reinterpret_cast<const char*>(&loss), sizeof loss);
    settings.append(reinterpret_cast<const char*>(&s.optimizer), sizeof s.optimizer);
    settings.append(reinterpret_cast<const char*>(&s.precision), sizeof s.precision);
    settings.append(reinterpret_cast<const char*>(&s.regime), sizeof s.regime);
    settings.append(reinterpret_cast<const char*>(&s.layered_chunk_bytes), sizeof s.layered_chunk_bytes);
    // The model's own values too (a layer_norm's eps, a leaky_relu's slope, a traced
    // activation's constants): the kernels bake them in, and `s.model = other` keeps
    // every buffer's address.
    settings.append(reinterpret_cast<const char*>(&s.model), sizeof s.model);
    detail::graph_cache::key_type key{
        x.data(), y.data(), x.batch(), 0, std::move(settings),
        detail::addresses_of(s.params, s.optimizer_state, s.loss, s.partials, s.history, s.failed, s.step_counter) +
            s.layered.addresses()};
    const auto key_for = [&](std::size_t steps) {
      detail::graph_cache::key_type k = key;
      k.steps = steps;
      return k;
    };
    const auto hold_graph_of = [&](std::size_t steps) {
      const auto k = key_for(steps);
      if (!s.graph.holds(k))
        detail::plan_products(s.model, loss, static_cast<const T*>(s.params.data()), x, y,
                              layered, s.layered, s.precision, s.graph.stream());
      s.graph.hold(k, [&](cudaStream_t stream) {
        for (std::size_t e = 0; e < steps; ++e) detail::enqueue_step(s, loss, x, y, stream, true);
      });
    };
    // Both graphs held before either runs: a capture that fails (no memory) then
    // leaves the parameters, the optimizer's state and the step counter as they were.
    const std::size_t per_graph = std::min(epochs, detail::graph_steps), rest = epochs % per_graph;
    hold_graph_of(per_graph);
    if (rest != 0) hold_graph_of(rest);
    for (std::size_t e = 0; e + per_graph <= epochs; e += per_graph) s.graph.launch(key_for(per_graph));
    if (rest != 0) s.graph.launch(key_for(rest));
  }
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<long> failed = s.failed.to_host();
  const std::size_t done = failed[0] >= 0 ? std::size_t(failed[0] - first_step) : epochs;
  s.step = first_step + long(done);  // steps after a non-finite loss or gradient were not applied
  s.step_counter.set(0, s.step);
  std::vector<T> history(done);
  s.history.copy_to(history.data(), 0, done);
  result.loss_history.assign(history.begin(), history.end());
  if (options.progress) detail::report_finished_run(result.loss_history, options.log_every, result.seconds);
  if (failed[0] >= 0)
    throw numeric_error(detail::failure_message("fit", failed[0], failed[1],
                                                detail::non_finite_cause(&x, &y, s.params, failed[0] == 0)),
                        std::move(result.loss_history));
  return result;
}

// The model's outputs for every sample of a device batch: (outputs, batch) on the device.
template <model Model, class T>
basic_device_matrix<T> apply(const Model& model, const device_buffer<T>& params,
                             const basic_device_matrix<T>& x, gpu_regime regime = gpu_regime::automatic,
                             std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  detail::check_batch<Model>("apply", x);
  detail::require_size("apply", "the number of parameters", Model::parameter_count, params.size());
  basic_device_matrix<T> y{Model::outputs, x.batch(), device_buffer<T>(Model::outputs * x.batch())};
  if constexpr (detail::layered_available<Model>) {
    if (detail::takes_layered_path<Model, T>(regime)) {
      detail::layered_workspace_for<Model, T> workspace;
      workspace.prepare("apply", x.batch(), layered_chunk_bytes, false);
      detail::gpu::layered_apply(model, params.data(), x.data(), x.batch(), y.data(),
                                 workspace);
      return y;
    }
  }
  if constexpr (detail::fused_available<Model, T>) {
    detail::gpu::apply_kernel<<<detail::gpu::grid_stride_blocks(x.batch()), 256>>>(model, params.data(), x.data(), x.batch(),
                                               y.data());
    TL_CUDA_CHECK_LAUNCH("apply_kernel");
  }
  return y;
}
// With host parameters (as the device value_and_grad takes them): copied to the device
// first. (A newcomer's tl::apply(net, state.host_params(), dx) did not compile.)
template <model Model, class T>
basic_device_matrix<T> apply(const Model& model, const parameters<Model, T>& params, const basic_device_matrix<T>& x,
                             gpu_regime regime = gpu_regime::automatic,
                             std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  const device_buffer<T> on_device(params.data(), Model::parameter_count);
  return apply(model, on_device, x, regime, layered_chunk_bytes);
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
                                           std::size_t layered_chunk_bytes = detail::gpu::default_chunk_bytes) {
  static_assert(check_loss<Loss>() || true);  // the check reports itself
  detail::check_batch<Model>("value_and_grad", x, &y);
  constexpr std::size_t P = Model::parameter_count;
  device_buffer<T> p(params.data(), P), grad(P), out(1), partials;
  detail::layered_workspace_for<Model, T> workspace;
  const bool layered = detail::takes_layered_path<Model, T>(regime, precision);
  detail::prepare_step<Model, T>("value_and_grad", x.batch(), layered, partials, workspace, layered_chunk_bytes,
                                 precision);
  detail::step_output<sgd, T> result_at{out.data(), grad.data()};
  detail::enqueue_gradient(model, loss, p.data(), x, y, layered, partials, workspace,
                           precision, result_at, cudaStream_t(0));
  loss_and_gradient<Model, T> result{out.get(0), parameters<Model, T>{}};
  grad.copy_to(result.gradient.data());
  return result;
}

}  // namespace tl
