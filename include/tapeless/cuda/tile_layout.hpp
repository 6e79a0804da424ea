// The shared-memory and register layout of the tiled kernels (cuda/tiled.hpp): a
// block keeps one tile of samples in shared memory, one row of the tile's samples per
// unit, and its threads keep the layers' weight-gradient sums in registers, packed
// over slots (tiled_layout).
#pragma once

#include <array>
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
// their 16-byte loads hit distinct banks. A thin layer has fewer micro-tiles than
// threads, so each is split over `split` threads by samples (fp32_weight_gradient) and
// summed once, at the end. With tensor cores (uses_mma), into groups of 16x8 tiles,
// warp w owning groups w, w + 8, ... (4 registers a tile). Bias gradients: 4 threads
// an output, each a quarter of the tile's samples.
template <class Model, std::size_t L, matmul_precision P>
struct tiled_layer {
  using layer = typename Model::template layer_type<L>;
  static constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  static constexpr bool uses_mma = P == matmul_precision::tf32 && In % 16 == 0 && Out % 16 == 0;
  static constexpr std::size_t out_groups = ceil_div(Out, 4), in_groups = ceil_div(In, 4);
  static constexpr std::size_t gradient_tiles = out_groups * in_groups;
  // The weight gradient's stage runs beside the input delta's, whose threads each take
  // Out multiply-adds a sample where a micro-tile takes 4 x 4: splitting a micro-tile's
  // samples 64 / Out ways (at most 4, and while the threads last) evens the two out,
  // whatever the tile's length (both stages' work grows with it).
  static constexpr std::size_t split = [] {
    std::size_t s = 1;
    while (s < 4 && 2 * s * Out <= 64 && 2 * s * gradient_tiles <= tiled_threads) s *= 2;
    return s;
  }();
  // Threads of the packed slots (tiled_layout), whole warps: a stage's warps then hold
  // one layer's work each.
  static constexpr std::size_t gradient_threads = uses_mma ? 0 : ceil_div(gradient_tiles * split, warp_size) * warp_size;
  static constexpr std::size_t bias_threads = ceil_div(4 * Out, warp_size) * warp_size;
  // Tensor cores: groups of one 16-row tile and mma_group 8-column tiles of dW.
  static constexpr std::size_t mma_group = In / 8 % 4 == 0 ? 4 : 2;
  static constexpr std::size_t mma_groups = (Out / 16) * (In / 8 / mma_group);
  static constexpr std::size_t mma_rounds = ceil_div(mma_groups, tiled_warps);
  static constexpr std::size_t mma_slice = uses_mma ? mma_rounds * 4 * mma_group : 0;
  // Weight rows start 16-byte aligned and hold whole float4s.
  static constexpr bool float4_rows = In % 4 == 0 && weights_at<Model, L> % 4 == 0;
  // Tensor-core layers keep a TF32-rounded copy of W, rows padded to In + 4 floats
  // (fragment loads of 8 rows hit distinct banks).
  static constexpr std::size_t mma_row = In + 4;
  static constexpr std::size_t mma_copy_floats = uses_mma ? Out * mma_row : 0;
};

// The micro-tile a thread takes first in layer L's forward: a thin layer has fewer
// micro-tiles than threads, and rotating by whole warps puts each layer's on another
// scheduler (warp w issues on w % 4).
template <std::size_t L>
__device__ inline std::size_t first_micro_tile() {
  return (threadIdx.x + warp_size * ((3 * L + 5) % tiled_warps)) % tiled_threads;
}

// Where blocks of virtual threads go in slots of tiled_threads, first fit: a block of
// at most a slot goes whole into the first slot with room for it, a larger one takes
// slots of its own. A block crossing into another slot would run its two parts one
// after the other in the warps that hold both, and compile its loop twice (a 64x64
// layer packed end to end ran 1-64-64-1 0.95x). Returns each block's first virtual
// thread, then the slot count.
template <std::size_t N>
constexpr std::array<std::size_t, N + 1> first_fit(const std::array<std::size_t, N>& sizes) {
  std::array<std::size_t, N + 1> placed{};
  std::array<std::size_t, N> fill{};  // slots holding blocks of at most a slot: at most N
  std::array<std::size_t, N> index{};
  std::size_t slots = 0, open = 0;  // all slots; those that small blocks share
  for (std::size_t b = 0; b < N; ++b) {
    const std::size_t n = sizes[b];
    if (n == 0) continue;  // a tensor-core layer: no fp32 slots
    if (n > tiled_threads) {
      placed[b] = slots * tiled_threads;
      slots += ceil_div(n, tiled_threads);
      continue;
    }
    std::size_t j = 0;
    while (j < open && fill[j] + n > tiled_threads) ++j;
    if (j == open) {
      index[open++] = slots++;
    }
    placed[b] = index[j] * tiled_threads + fill[j];
    fill[j] += n;
  }
  placed[N] = slots;
  return placed;
}

template <class Model, matmul_precision P, class Field, std::size_t... L>
constexpr std::array<std::size_t, sizeof...(L)> per_layer(Field field, std::index_sequence<L...>) {
  return {field(tiled_layer<Model, L, P>{})...};
}

// Shared floats: the parameters, then rows of tile + 4 floats (the input tile, each
// layer's outputs, each layer's slopes: activation derivatives, then deltas), then the
// tensor-core layers' weight copies.
template <class Model>
inline constexpr std::size_t params_floats = round4(Model::parameter_count);
template <class Model>
inline constexpr std::size_t unit_rows = Model::inputs + 2 * output_count<Model>;

// Two blocks a multiprocessor (the kernel's launch bounds) share sm_90's 228 KB of
// shared memory, less 1 KB each that the driver keeps: at most this much a block.
inline constexpr std::size_t two_blocks_shared = 112 * 1024;

// Packed slots: the layers' fp32 weight-gradient threads (and, apart, their bias
// threads) are placed over "virtual threads" g = threadIdx.x + tiled_threads k
// (first_fit), and virtual thread g keeps its sums in slot k. Thin layers then share a
// slot instead of each taking one: 16 registers a slot instead of 16 a layer, which
// keeps 2-16x7-1's sums in registers (136 floats a thread before, spilled; 34 now).
//
// The tile: 64 samples, or 32 in fp32 where a tile of 64 leaves room for one block a
// multiprocessor and one of 32 for two (64-4 in the grid: 137 KiB at 64 samples, 88 at
// 32), and where the widest layer's forward at 32 samples still keeps half the block's
// threads busy (4 outputs x 4 samples a thread: 16 groups of 4 outputs, 61 outputs or
// more). A second block's warps then run while the first waits at a barrier, and a
// batch divides into twice as many tiles to share out: 64-4 gained 1.10-1.19x. The
// grid's 32-8 fits two blocks at 32 too, but its 32-wide layers kept a quarter of the
// threads busy and it lost 4 % at 10^6 samples (docs/performance.md, 2026-12-05), so it
// keeps tiles of 64. TF32 layouts keep 64: their tensor-core products at a tile of 32
// have not been run on a GPU (and the grid's TF32 models need the room for their
// weight copies: 64-4 and 32-8 stay over 112 KiB at 32 samples).
template <class Model, matmul_precision P>
struct tiled_layout {
  using layers = std::make_index_sequence<Model::depth>;
  static constexpr auto gradient_packing =
      first_fit(per_layer<Model, P>([](auto s) { return decltype(s)::gradient_threads; }, layers{}));
  static constexpr auto bias_packing =
      first_fit(per_layer<Model, P>([](auto s) { return decltype(s)::bias_threads; }, layers{}));
  static constexpr auto mma_slices = per_layer<Model, P>([](auto s) { return decltype(s)::mma_slice; }, layers{});
  static constexpr auto mma_copies = per_layer<Model, P>([](auto s) { return decltype(s)::mma_copy_floats; }, layers{});
  static constexpr std::size_t sum_before(const std::array<std::size_t, Model::depth>& values, std::size_t layer) {
    std::size_t sum = 0;
    for (std::size_t l = 0; l < layer; ++l) sum += values[l];
    return sum;
  }
  template <std::size_t L>
  static constexpr std::size_t mma_slice = sum_before(mma_slices, L);
  template <std::size_t L>
  static constexpr std::size_t gradient_start = gradient_packing[L];
  template <std::size_t L>
  static constexpr std::size_t bias_start = bias_packing[L];
  static constexpr std::size_t gradient_slots = gradient_packing[Model::depth];
  static constexpr std::size_t bias_slots = bias_packing[Model::depth];
  // Registers: the tensor-core layers' groups, 16 a weight-gradient slot, 1 a bias slot.
  static constexpr std::size_t gradient_registers = mma_slice<Model::depth>;
  static constexpr std::size_t bias_registers = gradient_registers + 16 * gradient_slots;
  static constexpr std::size_t registers = bias_registers + bias_slots;
  // Shared floats with tiles of `samples`: the parameters, unit rows of samples + 4
  // floats, then the tensor-core layers' weight copies (mma_copy<L> below).
  static constexpr std::size_t shared_floats_at(std::size_t samples) {
    return params_floats<Model> + unit_rows<Model> * (samples + 4) + sum_before(mma_copies, Model::depth);
  }
  static constexpr std::size_t widest_out_groups = [] {
    std::size_t widest = 0;
    for (std::size_t g : per_layer<Model, P>([](auto s) { return decltype(s)::out_groups; }, layers{}))
      widest = g > widest ? g : widest;
    return widest;
  }();
  static constexpr bool short_tile_pays = P == matmul_precision::fp32 &&
                                          sizeof(float) * shared_floats_at(64) > two_blocks_shared &&
                                          sizeof(float) * shared_floats_at(32) <= two_blocks_shared &&
                                          widest_out_groups * (32 / 4) >= tiled_threads / 2;
  static constexpr std::size_t tile = short_tile_pays ? 32 : 64;
  static constexpr std::size_t row = tile + 4;           // floats a unit row: 16-byte aligned, 4 banks apart
  static constexpr std::size_t sample_quads = tile / 4;  // a micro-tile's 4 samples
  template <std::size_t L>
  static constexpr std::size_t mma_copy = params_floats<Model> + unit_rows<Model> * row + sum_before(mma_copies, L);
  static constexpr std::size_t shared_floats = shared_floats_at(tile);
};

// Layer L's outputs; L = size_t(-1) is the input tile.
template <class Model, matmul_precision P, std::size_t L>
__device__ inline float* tile_out(float* shared) {
  constexpr std::size_t row = tiled_layout<Model, P>::row;
  float* rows = shared + params_floats<Model>;
  if constexpr (L == std::size_t(-1)) return rows;
  else return rows + (Model::inputs + Model::template output_offset<L>) * row;
}
template <class Model, matmul_precision P, std::size_t L>
__device__ inline float* tile_slope(float* shared) {
  constexpr std::size_t row = tiled_layout<Model, P>::row;
  return shared + params_floats<Model> +
         (Model::inputs + output_count<Model> + Model::template output_offset<L>) * row;
}

}  // namespace tl::detail::gpu
