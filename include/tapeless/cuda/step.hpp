// One training step's kernels on a CUDA device, chosen by the model's type and the
// state's settings (docs/design.md, "GPU paths"): the per-sample kernels (per-thread
// registers, tiled, general), or the layer-at-a-time GEMMs (cuda/layered.hpp), then
// reduce_update_kernel. cuda/train.hpp builds the user's calls on these.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "tapeless/core/environment.hpp"
#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/general_kernel.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/layered.hpp"
#include "tapeless/cuda/tiled.hpp"
#include "tapeless/train/state.hpp"

namespace tl::detail {
inline constexpr int step_threads = 256;
// Models with more gradient sums than this per thread use the tiled or general kernels.
inline constexpr std::size_t per_thread_gradient_limit = 256;
template <model Model>
inline constexpr bool per_thread_gradients = Model::parameter_count + 1 <= per_thread_gradient_limit;

// The general kernel keeps P + 1 sums per thread in local memory up to this many
// parameters; past it, each thread keeps them in its own row of global memory
// (gpu::wide_general_sums_kernel: slower, so that no model is refused).
inline constexpr std::size_t general_parameter_limit = 8192;
template <model Model>
inline constexpr bool general_sums_in_rows = Model::parameter_count > general_parameter_limit;

// The models whose programs compile the layered path in: not those that train on the
// per-thread kernels, whose nvcc build it would lengthen (the seed fit's: 13.2 s
// without it, 25.2 s with it, on the 2-core machine); of models with other layers than
// dense ones, those past general_parameter_limit (below it the general kernel trains
// them, in local memory).
template <model Model>
inline constexpr bool layered_available =
    gpu::layered_supports<Model> && !per_thread_gradients<Model> &&
    (is_dense_chain<Model>::value || Model::parameter_count > general_parameter_limit);

struct no_workspace {
  std::string addresses() const { return {}; }
};
// The layered path's buffers, for the models it can train.
template <class Model, class T>
using layered_workspace_for =
    std::conditional_t<layered_available<Model>, gpu::layered_workspace<gpu::layered_view<Model>, T>, no_workspace>;

// Parameters, optimizer state and the per-step partials, checked before allocating.
template <model Model, class Optimizer, class T>
std::size_t checked_parameter_count() {
  constexpr std::size_t P = Model::parameter_count;
  require_device_memory("cuda_train_state", sizeof(T) * P * (Optimizer::state_slots + 3),
                        "the model's " + std::to_string(P) + " parameters, their optimizer state and gradient");
  return P;
}

// fit() runs the whole loop in one block when batch x (P + 1) is at most
// one_block_work and batch x (P + 1)^2 at most one_block_square_work. One block's time
// grows with the samples each of its 256 threads takes, each costing more than P's
// share once a thread's P + 1 sums crowd its registers; the per-step kernels' time
// stays near 5-20 µs a step up to ~10^4 samples. Measured in float on an H100
// (bench/gpu/one_launch_gpu.cu, docs/performance.md 2026-12-07 evening): one launch
// was the faster up to 2048 samples for P = 49, 1500 for 65, 1000 for 97, 512 for
// 129, 256 for 169 and 128 for 193 and 242 (at 256 both were within 1.2 % there);
// past those it lost by up to 1.47x (2-32-1 at 1000 samples: 11.4 µs against 7.8),
// which the first bound alone allowed. Double models share the bounds (not measured).
inline constexpr std::size_t one_block_work = std::size_t(1) << 17;
inline constexpr std::size_t one_block_square_work = 10'000'000;
template <model Model>
constexpr bool one_block_fits(std::size_t batch) {
  constexpr std::size_t sums = Model::parameter_count + 1;
  return batch * sums <= one_block_work && batch * sums * sums <= one_block_square_work;
}
// TAPELESS_GPU_ONE_LAUNCH=always: the one-block loop past both bounds too (wherever
// the model's sums fit a thread), so that bench/gpu/one_launch_gpu.cu times it on both
// sides of them. Read once; any other value is an error the first fit reports.
inline bool one_block_forced_by_environment() {
  static const bool forced = environment_switch("TAPELESS_GPU_ONE_LAUNCH", "always");
  return forced;
}

// The tiled kernels keep one tile's activations in shared memory: up to this much.
inline constexpr std::size_t tiled_shared_limit = 200 * 1024;
template <model Model, class T>
constexpr bool tiled_possible() {
  if constexpr (gpu::tiled_supports<Model, T>)
    return gpu::tiled_layout<Model, matmul_precision::fp32>::shared_floats * sizeof(float) <= tiled_shared_limit;
  else return false;
}
enum class gpu_path { registers, tiled, layered, general };
// The per-sample ("fused") kernels a model can take, and whether it can take any: a
// dense chain too large for all of them trains on the layered path only.
template <model Model, class T>
inline constexpr gpu_path fused_path = per_thread_gradients<Model> ? gpu_path::registers
                                       : tiled_possible<Model, T>() ? gpu_path::tiled
                                                                    : gpu_path::general;
// (A model with other layers can always take them: past general_parameter_limit, the
// general kernel with its sums in rows of global memory.)
template <model Model, class T>
inline constexpr bool fused_available = !layered_available<Model> || fused_path<Model, T> != gpu_path::general ||
                                        Model::parameter_count <= general_parameter_limit ||
                                        !is_dense_chain<Model>::value;
// The automatic choice: the per-thread or tiled kernels where they fit, else the
// layered path where it is compiled in (dense chains; other models past
// general_parameter_limit), else the general kernel.
template <model Model, class T>
inline constexpr gpu_path path_for = fused_path<Model, T> != gpu_path::general ? fused_path<Model, T>
                                     : layered_available<Model>                 ? gpu_path::layered
                                                                                : gpu_path::general;

// Whether a step takes the layered path under `regime`; a regime the model cannot
// take is a shape_error. bf16 products exist on the layered path only.
template <model Model, class T>
bool takes_layered_path(gpu_regime regime, matmul_precision precision = matmul_precision::fp32) {
  if constexpr (!layered_available<Model>) {
    if (regime == gpu_regime::layered || precision == matmul_precision::bf16)
      throw shape_error(std::string("tapeless: ") +
                        (regime == gpu_regime::layered ? "gpu_regime::layered" : "matmul_precision::bf16") +
                        " applies to chains of dense layers of more than 255 parameters and to other models "
                        "of more than 8192 (whose other layers have at most 65536 each); this model is not one "
                        "(smaller models train on the per-thread or general kernels)");
    return false;
  } else {
    if (precision == matmul_precision::bf16 && !is_dense_chain<Model>::value)
      throw shape_error("tapeless: matmul_precision::bf16 applies to chains of dense layers; this model has other "
                        "layers (layer_norm, skip, ...): use fp32 or tf32");
    if (regime == gpu_regime::fused) {
      if (precision == matmul_precision::bf16)
        throw shape_error("tapeless: matmul_precision::bf16 runs on the layer-at-a-time path only, not gpu_regime::fused");
      if (!fused_available<Model, T>)
        throw shape_error("tapeless: gpu_regime::fused: this model's layers do not fit the fused kernels' shared memory "
                          "(a tile of its activations needs over 200 KB); use gpu_regime::automatic or layered");
      return false;
    }
    return regime == gpu_regime::layered || precision == matmul_precision::bf16 ||
           path_for<Model, T> == gpu_path::layered;
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
  if constexpr (fused_path<Model, T> == gpu_path::registers) {
    return static_cast<int>(std::min<std::size_t>((batch + step_threads - 1) / step_threads, 1024));
  } else if constexpr (fused_path<Model, T> == gpu_path::tiled) {
    // persistent blocks, each summing many tiles: one wave at 2 blocks per SM (the launch
    // bounds). Counted from the shorter of the two precisions' tiles (TF32 keeps 64), so
    // that one count of partials serves both.
    constexpr std::size_t tile = std::min(gpu::tiled_layout<Model, matmul_precision::fp32>::tile,
                                          gpu::tiled_layout<Model, matmul_precision::tf32>::tile);
    return static_cast<int>(std::min<std::size_t>((batch + tile - 1) / tile, 2 * multiprocessors()));
  } else if constexpr (general_sums_in_rows<Model>) {
    return static_cast<int>(gpu::wide_general_rows<Model, T>(batch));  // one row a thread
  } else {
    return static_cast<int>(std::min<std::size_t>((batch + gpu::general_threads - 1) / gpu::general_threads,
                                                  4 * multiprocessors()));
  }
}

// Grows `partials` to one row per block (outside any graph capture).
template <model Model, class T>
int size_partials(std::size_t batch, device_buffer<T>& partials, const char* where = "train_step") {
  const int blocks = step_blocks<Model, T>(batch);
  const std::size_t row = gpu::partial_row<Model::parameter_count>, want = std::size_t(blocks) * row;
  if (partials.size() < want) {
    require_device_memory(where, sizeof(T) * (want - partials.size()),
                          "the gradient sums' " + std::to_string(blocks) + " rows of " + std::to_string(row) + " values");
    partials.resize(want);
  }
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

// Kernel 1 of the per-step path; leaves one row of partial sums per block (per thread
// in the wide general kernel) in `partials` and returns how many. `precision` applies to the tiled path, `Sums` to the general kernel
// (training takes the default; the A/B and the tests name the others).
template <gpu::general_sums Sums = gpu::general_default_sums, model Model, class Loss, class T>
int launch_partials(const Model& model, const Loss& loss, const T* params, const basic_device_matrix<T>& x,
                    const basic_device_matrix<T>& y, device_buffer<T>& partials, long* step_counter,
                    matmul_precision precision, cudaStream_t stream = 0) {
  constexpr std::size_t N = Model::parameter_count + 1;
  const int blocks = size_partials<Model>(x.batch(), partials);
  T* out = partials.data();
  if constexpr (fused_path<Model, T> == gpu_path::registers) {
    const std::size_t shared = (step_threads / gpu::warp_size) * gpu::padded_sums<N> * sizeof(T);
    gpu::partial_sums_kernel<<<blocks, step_threads, shared, stream>>>(model, loss, params, x.data(), y.data(),
                                                                       x.batch(), out, step_counter);
    TL_CUDA_CHECK_LAUNCH("partial_sums_kernel");
  } else if constexpr (fused_path<Model, T> == gpu_path::tiled) {
    if (precision == matmul_precision::tf32)
      launch_tiled<Model, Loss, matmul_precision::tf32>(model, loss, params, x, y, blocks, out, step_counter, stream);
    else
      launch_tiled<Model, Loss, matmul_precision::fp32>(model, loss, params, x, y, blocks, out, step_counter, stream);
  } else if constexpr (general_sums_in_rows<Model>) {
    gpu::wide_general_sums_kernel<<<blocks / gpu::general_threads, gpu::general_threads, 0, stream>>>(
        model, loss, params, x.data(), y.data(), x.batch(), out, step_counter);
    TL_CUDA_CHECK_LAUNCH("wide_general_sums_kernel");
  } else {
    constexpr std::size_t shared = gpu::general_shared_bytes<Sums, T>(N);
    static const bool configured = (allow_shared(gpu::general_partial_sums_kernel<Model, Loss, T, Sums>, shared), true);
    (void)configured;
    gpu::general_partial_sums_kernel<Model, Loss, T, Sums><<<blocks, gpu::general_threads, shared, stream>>>(
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
void prepare_step(const char* where, std::size_t batch, bool layered, device_buffer<T>& partials,
                  layered_workspace_for<Model, T>& workspace, std::size_t chunk_bytes, matmul_precision precision) {
  if constexpr (layered_available<Model>) {
    if (layered)
      return workspace.prepare(where, batch, chunk_bytes, true,
                               precision == matmul_precision::bf16 && std::is_same_v<T, float>);
  }
  if constexpr (fused_available<Model, T>) size_partials<Model, T>(batch, partials, where);
}

// One step's gradient sums on `stream` (the per-sample kernels, or the layered path's
// GEMMs), then reduce_update_kernel; `params` are read, and updated when out.params is.
template <model Model, class Loss, class T, class Optimizer>
void enqueue_gradient(const Model& model, const Loss& loss, const T* params, const basic_device_matrix<T>& x,
                      const basic_device_matrix<T>& y, bool layered, device_buffer<T>& partials,
                      layered_workspace_for<Model, T>& workspace, matmul_precision precision,
                      const step_output<Optimizer, T>& out, cudaStream_t stream) {
  const T scale = loss_scale<T, Model, Loss>(x.batch());
  const auto reduce = [&](const auto& view) {
    gpu::launch_reduce_update<Model>(view, scale, out.loss, out.grad, out.optimizer, out.params, out.state,
                                     out.counter, out.history, out.failed, stream);
    TL_CUDA_CHECK_LAUNCH("reduce_update_kernel");
  };
  if constexpr (layered_available<Model>) {
    if (layered) {
      gpu::layered_partial_sums(model, loss, params, x.data(), y.data(), x.batch(), workspace, precision, out.counter,
                                stream);
      return reduce(workspace.view());
    }
  }
  if constexpr (fused_available<Model, T>) {
    const int blocks = launch_partials(model, loss, params, x, y, partials, out.counter, precision, stream);
    reduce(gpu::block_partials<Model::parameter_count, T>{partials.data(), blocks});
  }
}

// fit() captures its steps in a graph, inside which cuBLASLt's candidate kernels
// cannot be timed (cuda/blas.hpp): one gradient computation on `stream` before the
// capture plans and times every product of the step. What it writes (the gradient
// sums, the per-sample losses) is scratch that the captured steps overwrite.
template <model Model, class Loss, class T>
void plan_products(const Model& model, const Loss& loss, const T* params, const basic_device_matrix<T>& x,
                   const basic_device_matrix<T>& y, bool layered, layered_workspace_for<Model, T>& workspace,
                   matmul_precision precision, cudaStream_t stream) {
  if constexpr (layered_available<Model>) {
    if (!layered || !gpu::blas_tuning_enabled()) return;
    gpu::layered_partial_sums(model, loss, params, x.data(), y.data(), x.batch(), workspace, precision, nullptr,
                              stream);
    TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

}  // namespace tl::detail
