// One dense layer of the blocked CPU pass (cpu/blocked_chain.hpp) over a chunk of
// samples: the forward product with bias and activation in its epilogue, the weight
// gradient added straight into the thread's [P] sums, the input delta with the layer
// below's slope in its epilogue. Values are sample-major, [sample][unit], each row
// padded to whole vectors (`stride`); the padding columns hold zeros and are never
// read into a real result. Rows come in whole register tiles (the chain pads the
// chunk with copies of its last sample, whose deltas are zero).
//
// The weights are rearranged once per step (`pack`), so that every product reads its
// B operand as contiguous panels: W transposed, [panel of outputs][input][panel
// width], for the forward; W as is, [panel of inputs][output][panel width], for the
// input delta; the bias padded to whole vectors. A layer with very few outputs (the
// last one of a regression model) computes its forward as dot products instead: a
// tile of one output is mostly padding.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "tapeless/cpu/register_tile.hpp"
#include "tapeless/nn/dense.hpp"

namespace tl::detail {

// ChunkRows: the most rows (samples) a chunk holds.
template <class Layer, class T, std::size_t ChunkRows>
struct blocked_dense;

template <std::size_t In, std::size_t Out, class Activation, class T, std::size_t ChunkRows>
struct blocked_dense<dense_layer<In, Out, Activation>, T, ChunkRows> {
  using layer_type = dense_layer<In, Out, Activation>;
  static constexpr std::size_t L = simd::lanes<T>, R = simd::tile_rows, panel = simd::tile_vectors * L;
  static constexpr std::size_t in_stride = simd::row_stride<T>(In), out_stride = simd::row_stride<T>(Out);

  // Vector multiply-adds per sample: a tile row costs In per vector of outputs; a dot
  // product per output costs its vectors of inputs and a sum of lanes (~log2 L + 2).
  static constexpr std::size_t ceil_log2(std::size_t n) { return n <= 1 ? 0 : 1 + ceil_log2((n + 1) / 2); }
  static constexpr bool dot_forward = Out * (in_stride / L + ceil_log2(L) + 2) < In * (out_stride / L);

  static constexpr std::size_t out_panels = (Out + panel - 1) / panel, in_panels = (In + panel - 1) / panel;
  static constexpr std::size_t forward_size = dot_forward ? Out * in_stride : out_panels * In * panel;
  static constexpr std::size_t backward_size = in_panels * Out * panel;
  static constexpr std::size_t packed_size = forward_size + backward_size + out_stride;
  // Scratch the layer's products need: partial sums of a long product ([rows][stride]),
  // the deltas packed for the weight gradient ([blocks of tile_rows outputs][rows][tile_rows]).
  static constexpr std::size_t scratch_size =
      ChunkRows * std::max({in_stride, out_stride, simd::round_up(Out, R)});

  // p: the layer's block of the flat parameters (W [Out][In], then b [Out]). Part
  // `part` of `parts` (threads share the work): every parts-th panel from the part-th.
  static void pack(const T* p, T* packed, std::size_t part = 0, std::size_t parts = 1) {
    const T* w = p + layer_type::weight_offset;
    T* forward = packed;
    T* backward = packed + forward_size;
    T* bias = backward + backward_size;
    if constexpr (dot_forward) {
      for (std::size_t o = part; o < Out; o += parts)
        for (std::size_t i = 0; i < in_stride; ++i) forward[o * in_stride + i] = i < In ? w[o * In + i] : T(0);
    } else {
      for (std::size_t q = part; q < out_panels; q += parts)
        for (std::size_t i = 0; i < In; ++i)
          for (std::size_t c = 0; c < panel; ++c) {
            const std::size_t o = q * panel + c;
            forward[(q * In + i) * panel + c] = o < Out ? w[o * In + i] : T(0);
          }
    }
    for (std::size_t q = part; q < in_panels; q += parts)
      for (std::size_t o = 0; o < Out; ++o)
        for (std::size_t c = 0; c < panel; ++c) {
          const std::size_t i = q * panel + c;
          backward[(q * Out + o) * panel + c] = i < In ? w[o * In + i] : T(0);
        }
    if (part == 0)
      for (std::size_t o = 0; o < out_stride; ++o) bias[o] = o < Out ? p[layer_type::bias_offset + o] : T(0);
  }

  // out = act(in W^T + b), slope = act'(...), for rows samples ([rows][stride]).
  // scratch: [rows][out_stride], for the partial sums of a long product.
  static void forward(const layer_type& layer, const T* packed, const T* in, T* out, T* slope, std::size_t rows,
                      T* scratch) {
    const T* bias = packed + forward_size + backward_size;
    if constexpr (dot_forward) {
      forward_by_dots(layer, packed, bias, in, out, slope, rows);
    } else {
      using operands = simd::operands<in_stride, 1, panel, In * panel>;
      simd::multiply<operands, Out>(in, packed, rows / R, In, scratch, [&](std::size_t row0, std::size_t col0, auto& tile, auto real) {
        using tile_type = std::remove_reference_t<decltype(tile)>;
        for (std::size_t r = 0; r < tile_type::rows; ++r) {
          // The activation runs on local copies: one loop of known length over arrays
          // that cannot alias, which g++ vectorizes (through out and slope, it would
          // need a run-time overlap check, which -O2 does not add).
          alignas(64) T z[tile_type::columns], s[tile_type::columns];
          for (std::size_t j = 0; j < tile_type::vectors; ++j) simd::store(z + j * L, tile.v[r][j] + simd::load(bias + col0 + j * L));
          for (std::size_t c = 0; c < real(); ++c) z[c] = layer.activation.value_and_derivative(z[c], s[c]);
          for (std::size_t c = real(); c < tile_type::columns; ++c) z[c] = s[c] = T(0);
          std::memcpy(out + (row0 + r) * out_stride + col0, z, sizeof z);
          std::memcpy(slope + (row0 + r) * out_stride + col0, s, sizeof s);
        }
      });
    }
  }

  // The weight gradient's product has the outputs as its rows and the inputs as its
  // columns, or the other way round when that wastes fewer lanes on padding (a first
  // layer of 2 inputs: 2 rows of whole vectors of outputs, not 16-lane vectors of 2).
  static constexpr bool inputs_as_rows = In * out_stride < Out * in_stride;

  // Adds d loss / d W and d loss / d b of the chunk into grad (the layer's block of
  // the thread's sums), from delta = d loss / d z ([rows][out_stride]):
  // dW[o][i] += sum_s delta[s][o] in[s][i], the samples as the shared dimension.
  static void add_gradient(const T* delta, const T* in, std::size_t rows, double* grad, T* scratch) {
    double* gw = grad + layer_type::weight_offset;
    double* gb = grad + layer_type::bias_offset;
    const auto add_tile = [&](std::size_t row0, std::size_t col0, auto& tile, auto real) {
      using tile_type = std::remove_reference_t<decltype(tile)>;
      for (std::size_t r = 0; r < tile_type::rows; ++r) {
        T sums[tile_type::columns];
        for (std::size_t j = 0; j < tile_type::vectors; ++j) simd::store(sums + j * L, tile.v[r][j]);
        if constexpr (inputs_as_rows)
          for (std::size_t c = 0; c < real(); ++c) gw[(col0 + c) * In + row0 + r] += double(sums[c]);
        else
          for (std::size_t c = 0; c < real(); ++c) gw[(row0 + r) * In + col0 + c] += double(sums[c]);
      }
    };
    // One pass over the deltas: the bias gradient's sums and, for the product with the
    // outputs as rows, the deltas packed tile_rows outputs at a time, sample by sample
    // ([block][sample][R]). Read in place, a tile's broadcasts would come from a
    // different line for every sample, and evict the panel of inputs it reuses
    // (measured: the weight gradient ran at two thirds of the forward's speed at 512).
    constexpr std::size_t full_blocks = Out / R, tail = Out % R;
    constexpr bool packed_deltas = !inputs_as_rows;
    alignas(64) T bias_sums[out_stride] = {};
    for (std::size_t s = 0; s < rows; ++s) {
      const T* d = delta + s * out_stride;
      for (std::size_t o = 0; o < out_stride; ++o) bias_sums[o] += d[o];  // padding columns hold zeros
      if constexpr (packed_deltas) {
        if constexpr (full_blocks > 0)  // (a loop to 0 is a warning for nvcc)
          for (std::size_t b = 0; b < full_blocks; ++b) std::memcpy(scratch + (b * ChunkRows + s) * R, d + b * R, R * sizeof(T));
        if constexpr (tail > 0)
          for (std::size_t r = 0; r < R; ++r) scratch[(full_blocks * ChunkRows + s) * R + r] = r < tail ? d[full_blocks * R + r] : T(0);
      }
    }
    for (std::size_t o = 0; o < Out; ++o) gb[o] += double(bias_sums[o]);
    if constexpr (inputs_as_rows) {
      using operands = simd::operands<1, in_stride, out_stride, panel>;
      simd::multiply<operands, Out, In % R>(in, delta, In / R, rows, static_cast<T*>(nullptr), add_tile);
    } else {
      using operands = simd::operands<1, R, in_stride, panel, ChunkRows>;
      simd::multiply<operands, In, tail>(scratch, in, full_blocks, rows, static_cast<T*>(nullptr), add_tile);
    }
  }

  // The layer below's delta: (delta W) ⊙ its slope, written over its slope; or, when
  // the stage below has no slopes (IntoSlopes false: not a dense layer), delta W
  // written over its delta buffer. scratch: [rows][in_stride], for the partial sums of
  // a long product.
  template <bool IntoSlopes = true>
  static void input_delta(const T* packed, const T* delta, T* below, std::size_t rows, T* scratch) {
    using operands = simd::operands<out_stride, 1, panel, Out * panel>;
    simd::multiply<operands, In>(delta, packed + forward_size, rows / R, Out, scratch, [&](std::size_t row0, std::size_t col0, auto& tile, auto) {
      using tile_type = std::remove_reference_t<decltype(tile)>;
      for (std::size_t r = 0; r < tile_type::rows; ++r) {
        T* s = below + (row0 + r) * in_stride + col0;
        for (std::size_t j = 0; j < tile_type::vectors; ++j) {
          if constexpr (IntoSlopes) simd::store(s + j * L, tile.v[r][j] * simd::load(s + j * L));
          else simd::store(s + j * L, tile.v[r][j]);
        }
      }
    });
  }

 private:
  // Out dot products per sample, a tile's rows at once (independent sums, so the
  // multiply-adds overlap), each summed over whole vectors of inputs, then its lanes.
  static void forward_by_dots(const layer_type& layer, const T* w, const T* bias, const T* in, T* out, T* slope,
                              std::size_t rows) {
    for (std::size_t row0 = 0; row0 < rows; row0 += R) {
      for (std::size_t o = 0; o < Out; ++o) {
        simd::vec<T> sum[R];
        TL_UNROLL(16)
        for (std::size_t r = 0; r < R; ++r) sum[r] = simd::vec<T>{};  // in registers (= {} cleared memory)
        for (std::size_t i = 0; i < in_stride; i += L) {
          const simd::vec<T> wi = simd::load(w + o * in_stride + i);
TL_UNROLL(16)
          for (std::size_t r = 0; r < R; ++r) sum[r] += simd::load(in + (row0 + r) * in_stride + i) * wi;
        }
        for (std::size_t r = 0; r < R; ++r) {
          const std::size_t at = (row0 + r) * out_stride + o;
          out[at] = layer.activation.value_and_derivative(simd::sum_lanes<T>(sum[r]) + bias[o], slope[at]);
        }
      }
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t o = Out; o < out_stride; ++o) out[(row0 + r) * out_stride + o] = slope[(row0 + r) * out_stride + o] = T(0);
    }
  }
};

}  // namespace tl::detail
