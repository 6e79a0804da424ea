// The layer-at-a-time path's plan and device memory (cuda/layered.hpp runs it): how a
// step's batch is cut into chunks, where each layer's activations lie in a chunk's
// workspace, and where each layer's weight-gradient sums go.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cuda_bf16.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "tapeless/cuda/blas.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/gemm.hpp"
#include "tapeless/cuda/kernels.hpp"
#include "tapeless/cuda/tile_layout.hpp"

namespace tl {
// Which GPU kernels train a model (docs/design.md, "GPU paths"). automatic: the fused
// per-sample kernels (per-thread, one-block, tiled, general) when the model fits them,
// else layer-at-a-time; fused and layered force one (layered: chains of dense layers).
enum class gpu_regime { automatic, fused, layered };

// Which matrix products the layered path runs: cuBLASLt's (the automatic choice: its
// kernels measured 2-8x faster than ours on the H200, docs/performance.md) with the
// bias and activation in one elementwise kernel after each product, or tapeless's own
// tiled GEMM (cuda/gemm.hpp) with them fused into its epilogues.
enum class gemm_backend { automatic, cublaslt, own };
}  // namespace tl

namespace tl::detail::gpu {

// The models the layered path can compute: chains of dense layers (cuda/step.hpp
// decides which of them compile it in).
template <class Model>
inline constexpr bool layered_supports = is_dense_chain<Model>::value;

inline constexpr std::size_t default_chunk_bytes = std::size_t(512) << 20;
inline constexpr bool uses_cublaslt(gemm_backend g) { return g != gemm_backend::own; }

// A chunk's workspace (`units`): every layer's outputs for `stride` samples, then every
// layer's slopes (activation derivatives, turned into deltas by the backward pass).
// The stride is the chunk's samples rounded up to 64, so every layer's rows start
// 256-byte aligned, as vectorized product kernels want.
template <class Model>
inline constexpr std::size_t unit_count = Model::template output_offset<Model::depth>;
template <class Model, std::size_t L, class T>
T* layer_outputs(T* units, std::size_t stride) {
  return units + Model::template output_offset<L> * stride;
}
template <class Model, std::size_t L, class T>
T* layer_slopes(T* units, std::size_t stride) {
  return units + (unit_count<Model> + Model::template output_offset<L>) * stride;
}
// Layer L's input: the chunk's data for the first layer, else the layer before's outputs.
template <class Model, std::size_t L, class T>
const T* layer_input(const T* x, T* units, std::size_t stride) {
  if constexpr (L == 0) return x;
  else return layer_outputs<Model, L - 1>(units, stride);
}
// The widest input of a layer after the first: cuBLASLt's input-delta products go
// through a buffer of that many values a sample before they are scaled by the slopes.
template <class Model>
inline constexpr std::size_t widest_hidden_input = []<std::size_t... L>(std::index_sequence<L...>) {
  return std::max({std::size_t(0), Model::template layer_type<L + 1>::inputs...});
}(std::make_index_sequence<Model::depth - 1>{});

// How one step is cut: samples per chunk, and each layer's weight-gradient rows.
template <class Model>
struct layered_plan {
  static constexpr std::size_t depth = Model::depth;
  std::size_t batch = 0, chunk = 0, stride = 0, chunk_bytes = 0;
  gemm_backend gemm = gemm_backend::automatic;
  bool training = false;
  std::array<unsigned, depth> slices{};
  std::array<std::size_t, depth> base{};  // layer l's rows start at base[l] in the partials
  std::size_t partial_floats = 0;

  bool same_as(const layered_plan& o) const {
    return batch == o.batch && chunk_bytes == o.chunk_bytes && uses_cublaslt(gemm) == uses_cublaslt(o.gemm) &&
           training == o.training;
  }

  template <class T>
  static layered_plan make(std::size_t batch, std::size_t chunk_bytes, int multiprocessors, gemm_backend gemm,
                           bool training) {
    layered_plan plan;
    plan.batch = batch;
    plan.chunk_bytes = chunk_bytes;
    plan.gemm = gemm;
    plan.training = training;
    const std::size_t per_sample = 2 * unit_count<Model> * sizeof(T);  // outputs and slopes
    plan.chunk = std::min(batch, std::clamp<std::size_t>(chunk_bytes / per_sample, 4096, std::size_t(1) << 21));
    plan.stride = (plan.chunk + 63) / 64 * 64;
    std::size_t offset = 0;
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      ((plan.slices[L] = uses_cublaslt(gemm)  // cuBLASLt splits its own sums
                             ? 1
                             : slices_for<typename Model::template layer_type<L>>(plan.chunk, multiprocessors),
        plan.base[L] = offset, offset += plan.slices[L] * Model::template layer_type<L>::parameter_count),
       ...);
    }(std::make_index_sequence<depth>{});
    plan.partial_floats = offset;
    return plan;
  }

 private:
  // Enough slices for two waves of blocks over the weight gradient's tiles, and at most
  // ~1024 samples a slice: a slice's slabs are read one after another, so a thin
  // layer's gradient (2 -> 512: 8 tiles) over 10^5 samples in few slices is a long
  // chain of dependent loads. Bounded by 2^25 partial values a layer (the rows are
  // written and read once a step) and by 64 samples a slice.
  template <class Layer>
  static unsigned slices_for(std::size_t chunk, int multiprocessors) {
    const std::size_t tiles = gemm_tiles(Layer::outputs) * gemm_tiles(Layer::inputs + 1);
    const std::size_t waves = (2 * std::size_t(multiprocessors) + tiles - 1) / tiles;
    const std::size_t wanted = std::max(waves, (chunk + 1023) / 1024);
    const std::size_t most = std::min<std::size_t>((chunk + 63) / 64, (std::size_t(1) << 25) / Layer::parameter_count);
    return unsigned(std::clamp<std::size_t>(std::min(wanted, most), 1, 1 << 16));
  }
};

// reduce_update_kernel's view of the layered partials: column j of layer l has
// slices[l] rows, P_l apart; the loss and the non-finite flag are single values.
template <class Model, class T>
struct layered_partials {
  static constexpr std::size_t depth = Model::depth;
  const T* p;
  const T* loss_and_flag;
  unsigned rows[depth];
  std::size_t base[depth], offset[depth + 1];
  __device__ int loss_rows() const { return 1; }
  __device__ T loss(int) const { return loss_and_flag[0]; }
  __device__ T flag(int) const { return loss_and_flag[1]; }
  __device__ partial_column<T> column(std::size_t j) const {
    std::size_t l = 0;
    while (l + 1 < depth && j >= offset[l + 1]) ++l;
    return {p + base[l] + (j - offset[l]), offset[l + 1] - offset[l], int(rows[l])};
  }
};

// The device memory of the layered path, sized for one plan (grown, never shrunk).
template <class Model, class T>
struct layered_workspace {
  layered_plan<Model> plan;
  thrust::device_vector<T> units;          // a chunk's outputs, then its slopes / deltas
  thrust::device_vector<T> partials;       // the weight-gradient rows of every layer
  thrust::device_vector<T> sample_losses;  // one per sample of the batch
  thrust::device_vector<T> loss_and_flag = thrust::device_vector<T>(2);
  thrust::device_vector<unsigned char> reduce_storage;  // cub::DeviceReduce's
  // cuBLASLt's: its plans, a column of ones (the bias gradient is delta times ones)
  // and the input-delta products before they are scaled by the slopes.
  blas_products blas;
  thrust::device_vector<T> ones, products;
  // bfloat16 copies of the products' operands, for matmul_precision::bf16: the
  // parameters (made once a step), a chunk's inputs, every layer's outputs, then every
  // layer's deltas, each written beside its fp32 values by the kernel that makes them.
  thrust::device_vector<__nv_bfloat16> low;
  __nv_bfloat16* low_params() { return thrust::raw_pointer_cast(low.data()); }
  static constexpr std::size_t low_params_size = (Model::parameter_count + 127) / 128 * 128;  // 256-byte aligned
  __nv_bfloat16* low_inputs() { return low_params() + low_params_size; }
  template <std::size_t L>
  __nv_bfloat16* low_outputs() {
    return low_inputs() + Model::inputs * plan.stride + Model::template output_offset<L> * plan.stride;
  }
  template <std::size_t L>
  __nv_bfloat16* low_deltas() {
    return low_inputs() + (Model::inputs + unit_count<Model> + Model::template output_offset<L>) * plan.stride;
  }
  // Layer L's input as bfloat16: the chunk's inputs for the first layer.
  template <std::size_t L>
  __nv_bfloat16* low_layer_input() {
    if constexpr (L == 0) return low_inputs();
    else return low_outputs<L - 1>();
  }

  // Sizes everything for `batch` (outside any graph capture); a shortfall of device
  // memory is reported before anything is allocated. Without `training`, the forward
  // pass's outputs only (apply).
  void prepare(const char* where, std::size_t batch, std::size_t chunk_bytes, int multiprocessors, gemm_backend gemm,
               bool training = true, bool bf16 = false) {
    const auto next = layered_plan<Model>::template make<T>(batch, chunk_bytes, multiprocessors, gemm, training);
    const bool library = uses_cublaslt(gemm);
    if (plan.same_as(next) && (!library || blas.ready()) && !(bf16 && training && low.empty()))
      return;  // (a copied state's cuBLASLt handle starts empty)
    std::size_t storage = 0;
    if (training)
      TL_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, storage, static_cast<const T*>(nullptr), static_cast<T*>(nullptr),
                                           batch));
    const std::size_t want_units = (training ? 2 : 1) * unit_count<Model> * next.stride;
    const std::size_t want_ones = library && training ? next.stride : 0;
    const std::size_t want_products = library && training ? widest_hidden_input<Model> * next.stride : 0;
    const std::size_t want_low =
        bf16 && training ? low_params_size + (Model::inputs + 2 * unit_count<Model>) * next.stride : 0;
    const auto grow = [](std::size_t want, std::size_t have) { return want > have ? want - have : 0; };
    const std::size_t bytes =
        sizeof(T) * (grow(want_units, units.size()) + grow(training ? next.partial_floats : 0, partials.size()) +
                     grow(training ? batch : 0, sample_losses.size()) + grow(want_ones, ones.size()) +
                     grow(want_products, products.size())) +
        sizeof(__nv_bfloat16) * grow(want_low, low.size()) +
        grow(storage, reduce_storage.size()) + (library && !blas.ready() ? blas_products::workspace_bytes : 0);
    require_device_memory(where, bytes, "the layer-at-a-time path's activations for " + std::to_string(next.chunk) +
                                            " samples" + (training ? " and its gradient sums" : ""));
    units.resize(std::max(units.size(), want_units));
    if (training) {
      partials.resize(std::max(partials.size(), next.partial_floats));
      sample_losses.resize(std::max(sample_losses.size(), batch));
      reduce_storage.resize(std::max(reduce_storage.size(), storage));
    }
    if (ones.size() < want_ones) {
      ones.resize(want_ones);
      thrust::fill(ones.begin(), ones.end(), T(1));
    }
    products.resize(std::max(products.size(), want_products));
    low.resize(std::max(low.size(), want_low));
    if (library) blas.prepare();
    plan = next;
  }

  layered_partials<Model, T> view() const {
    layered_partials<Model, T> v{thrust::raw_pointer_cast(partials.data()),
                                 thrust::raw_pointer_cast(loss_and_flag.data()), {}, {}, {}};
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      ((v.rows[L] = plan.slices[L], v.base[L] = plan.base[L], v.offset[L] = Model::template parameter_offset<L>), ...);
    }(std::make_index_sequence<Model::depth>{});
    v.offset[Model::depth] = Model::parameter_count;
    return v;
  }
};

}  // namespace tl::detail::gpu
