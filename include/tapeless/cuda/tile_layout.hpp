// The shared-memory and register layout of the tiled kernels (cuda/tiled.hpp): a
// block keeps one tile of samples in shared memory, one row of `tile` samples per
// unit, and each thread keeps a fixed slice of every layer's gradient in registers.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "tapeless/cuda/kernels.hpp"
#include "tapeless/nn/dense_chain.hpp"

namespace tl {
// How dense layers' products are multiplied on the GPU: fp32 FMAs (the default, as
// exact as the CPU path), or tensor cores with fp32 sums on TF32 inputs (10 mantissa
// bits; the tiled kernels for layers whose widths are multiples of 16, and the
// layer-at-a-time path) or on bfloat16 inputs (8 bits; the layer-at-a-time path, which
// automatic choice then takes). Parameters and optimizer state stay fp32 either way.
enum class matmul_precision { fp32, tf32, bf16 };
}  // namespace tl

namespace tl::detail::gpu {

// The tiled kernels are a fast path for chains of dense layers (nn/dense_chain.hpp), in
// float; every other model takes the per-thread path.
template <class Model, class T>
inline constexpr bool tiled_supports = std::is_same_v<T, float> && is_dense_chain<Model>::value;

// Where layer L's weights and biases start in the model's flat parameters.
template <class Model, std::size_t L>
inline constexpr std::size_t weights_at =
    Model::template parameter_offset<L> + Model::template layer_type<L>::weight_offset;
template <class Model, std::size_t L>
inline constexpr std::size_t bias_at = Model::template parameter_offset<L> + Model::template layer_type<L>::bias_offset;
// Units over all layers: each has a row of outputs and a row of slopes in a tile.
template <class Model>
inline constexpr std::size_t output_count = Model::template output_offset<Model::depth>;

inline constexpr int tiled_threads = 256;
inline constexpr std::size_t tiled_warps = tiled_threads / warp_size;
inline constexpr std::size_t tile = 64;                // samples per tile
inline constexpr std::size_t row = tile + 4;           // floats per unit row: 16-byte aligned, 4 banks apart
inline constexpr std::size_t sample_quads = tile / 4;  // a micro-tile's 4 samples
inline constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
inline constexpr std::size_t round4(std::size_t n) { return ceil_div(n, 4) * 4; }

__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ inline void fma4(float4& acc, float s, float4 v) {
  acc.x += s * v.x;
  acc.y += s * v.y;
  acc.z += s * v.z;
  acc.w += s * v.w;
}

// Layer L's shapes. With fp32, its weight gradient is cut into 4x4 micro-tiles with
// outputs o = og + out_groups r and inputs i = ig + in_groups r (r < 4); micro-tile t
// has og = t % out_groups, so threads next to each other own neighbouring rows and
// their 16-byte loads hit distinct banks. With tensor cores (uses_mma), into groups
// of 16x8 tiles, warp w owning groups w, w + 8, ... (4 registers a tile). Bias
// gradients: 4 threads an output, each a quarter of the tile's samples.
template <class Model, std::size_t L, matmul_precision P>
struct tiled_layer {
  using layer = typename Model::template layer_type<L>;
  static constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  static constexpr bool uses_mma = P == matmul_precision::tf32 && In % 16 == 0 && Out % 16 == 0;
  static constexpr std::size_t out_groups = ceil_div(Out, 4), in_groups = ceil_div(In, 4);
  static constexpr std::size_t gradient_tiles = out_groups * in_groups;
  // Tensor cores: groups of one 16-row tile and mma_group 8-column tiles of dW.
  static constexpr std::size_t mma_group = In / 8 % 4 == 0 ? 4 : 2;
  static constexpr std::size_t mma_groups = (Out / 16) * (In / 8 / mma_group);
  static constexpr std::size_t rounds =
      uses_mma ? ceil_div(mma_groups, tiled_warps) : ceil_div(gradient_tiles, tiled_threads);
  static constexpr std::size_t bias_rounds = ceil_div(4 * Out, tiled_threads);
  static constexpr std::size_t slice = rounds * (uses_mma ? 4 * mma_group : 16) + bias_rounds;
  // Weight rows start 16-byte aligned and hold whole float4s.
  static constexpr bool float4_rows = In % 4 == 0 && weights_at<Model, L> % 4 == 0;
  // Tensor-core layers keep a TF32-rounded copy of W, rows padded to In + 4 floats
  // (fragment loads of 8 rows hit distinct banks).
  static constexpr std::size_t mma_row = In + 4;
  static constexpr std::size_t mma_copy_floats = uses_mma ? Out * mma_row : 0;
};

// The micro-tile a thread takes first in a stage (forward 0, weight gradient 1) of
// layer L: a thin layer's stage has fewer micro-tiles than threads, and rotating by
// whole warps puts each such stage on another scheduler (warp w issues on w % 4).
template <std::size_t L, int Stage>
__device__ inline std::size_t first_micro_tile() {
  return (threadIdx.x + warp_size * ((3 * L + 5 * Stage) % tiled_warps)) % tiled_threads;
}

// Sums of a per-layer quantity over layers [0, layer).
template <class Model, matmul_precision P, std::size_t... L>
constexpr std::size_t slice_offset(std::size_t layer, std::index_sequence<L...>) {
  std::size_t offset = 0, l = 0;
  ((offset += l++ < layer ? tiled_layer<Model, L, P>::slice : 0), ...);
  return offset;
}
template <class Model, matmul_precision P, std::size_t... L>
constexpr std::size_t mma_copy_offset(std::size_t layer, std::index_sequence<L...>) {
  std::size_t offset = 0, l = 0;
  ((offset += l++ < layer ? tiled_layer<Model, L, P>::mma_copy_floats : 0), ...);
  return offset;
}

// Shared floats: the parameters, then rows of `row` floats (the input tile, each
// layer's outputs, each layer's slopes: activation derivatives, then deltas), then the
// tensor-core layers' weight copies.
template <class Model>
inline constexpr std::size_t params_floats = round4(Model::parameter_count);
template <class Model>
inline constexpr std::size_t row_floats = (Model::inputs + 2 * output_count<Model>) * row;

template <class Model, matmul_precision P>
struct tiled_layout {
  using layers = std::make_index_sequence<Model::depth>;
  static constexpr std::size_t registers = slice_offset<Model, P>(Model::depth, layers{});
  template <std::size_t L>
  static constexpr std::size_t slice = slice_offset<Model, P>(L, layers{});
  template <std::size_t L>
  static constexpr std::size_t mma_copy = params_floats<Model> + row_floats<Model> + mma_copy_offset<Model, P>(L, layers{});
  static constexpr std::size_t shared_floats = mma_copy<Model::depth>;
};

// Layer L's outputs; L = size_t(-1) is the input tile.
template <class Model, std::size_t L>
__device__ inline float* tile_out(float* shared) {
  float* rows = shared + params_floats<Model>;
  if constexpr (L == std::size_t(-1)) return rows;
  else return rows + (Model::inputs + Model::template output_offset<L>) * row;
}
template <class Model, std::size_t L>
__device__ inline float* tile_slope(float* shared) {
  return shared + params_floats<Model> +
         (Model::inputs + output_count<Model> + Model::template output_offset<L>) * row;
}

}  // namespace tl::detail::gpu
