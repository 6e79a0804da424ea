// A matrix product C = A B computed register tile by register tile, as a GEMM's
// micro-kernel does: for each step k of the shared dimension, the tile's vectors of
// B's row k are loaded once and each of its rows' entries A(r, k) is broadcast against
// them, so every load feeds several fused multiply-adds and the accumulators never
// leave the registers until the tile is done. The blocked dense pass
// (cpu/blocked_dense.hpp) runs its forward product, weight gradient and input delta
// through it; each hands the finished tiles to an epilogue (bias and activation,
// gradient sums, the slope of the layer below) while they are still in registers.
#pragma once

#include <cstddef>
#include <type_traits>

#include "tapeless/cpu/simd.hpp"

namespace tl::detail::simd {

template <class T, std::size_t Rows, std::size_t Vectors>
struct register_tile {
  static constexpr std::size_t rows = Rows, vectors = Vectors, columns = Vectors * lanes<T>;
  vec<T> v[Rows][Vectors];
};

// Where the operands' entries are, as compile-time strides (so that no register is
// spent on them): A(r, k) = a[r * a_row + k * a_step] (broadcast) within a block of
// rows, the block of rows from row0 at a + row0 * a_block_row; B(k, c) =
// b[k * b_step + c] (loaded as vectors), and column panel p of B starts at
// b + p * b_panel. A packed A ([block][k][tile_rows]) has a_row 1, a_step tile_rows
// and a_block_row the depth it was packed for.
template <std::size_t ARow, std::size_t AStep, std::size_t BStep, std::size_t BPanel, std::size_t ABlockRow = ARow>
struct operands {
  static constexpr std::size_t a_row = ARow, a_step = AStep, b_step = BStep, b_panel = BPanel;
  static constexpr std::size_t a_block_row = ABlockRow;
};

// tile (+)= A(0..rows, 0..depth) B(0..depth, 0..columns); `accumulate` false starts
// from zero (set here, in registers: a zero-initialized tile object would be cleared
// in memory and loaded back).
template <class Operands, class T, std::size_t R, std::size_t V>
TL_INLINE void multiply_add(register_tile<T, R, V>& tile, const T* a, const T* b, std::size_t depth, bool accumulate) {
  if (!accumulate) {
TL_UNROLL(16)
    for (std::size_t r = 0; r < R; ++r)
TL_UNROLL(8)
      for (std::size_t j = 0; j < V; ++j) tile.v[r][j] = vec<T>{};
  }
  for (std::size_t k = 0; k < depth; ++k) {
    vec<T> row_of_b[V];
TL_UNROLL(8)
    for (std::size_t j = 0; j < V; ++j) row_of_b[j] = load(b + k * Operands::b_step + j * lanes<T>);
TL_UNROLL(16)
    for (std::size_t r = 0; r < R; ++r) {
      const T broadcast = a[r * Operands::a_row + k * Operands::a_step];
TL_UNROLL(8)
      for (std::size_t j = 0; j < V; ++j) tile.v[r][j] += broadcast * row_of_b[j];
    }
  }
}

// Steps of the shared dimension per pass over B's panels: a panel's slice of
// depth_block rows (256 x 2 vectors: 32 KB) stays in L1 while every row block of A
// passes over it; a longer product keeps its partial tiles in `partial`.
inline constexpr std::size_t depth_block = 256;

// C (row_blocks * tile_rows + TailRows rows, Columns columns) = A B. Per block of the
// shared dimension, column panel by column panel (a panel's slice of B stays in L1),
// then row block by row block. The last panel is narrower when Columns is not a
// multiple of a panel; it still holds whole vectors, whose lanes past Columns belong
// to the caller's padding. epilogue(row0, column0, tile, real_columns) gets each
// finished tile; real_columns (a std::integral_constant) counts the tile's columns
// that are inside C. partial: [rows][row_stride(Columns)] of scratch, used only
// when depth > depth_block; without it (nullptr) the whole depth is one block (the
// weight gradient's, whose depth is a chunk's samples).
template <class Operands, std::size_t Columns, std::size_t TailRows = 0, class T, class Epilogue>
TL_WIDE_VECTORS void multiply(const T* a, const T* b, std::size_t row_blocks, std::size_t depth, T* partial, Epilogue&& epilogue) {
  constexpr std::size_t R = tile_rows, L = lanes<T>, panel = tile_vectors * L, stride = row_stride<T>(Columns);
  constexpr std::size_t full_panels = Columns / panel, edge_columns = Columns % panel;
  const std::size_t block = partial ? depth_block : depth;
  for (std::size_t k0 = 0; k0 < depth; k0 += block) {
    const std::size_t steps = depth - k0 < block ? depth - k0 : block;
    const bool first = k0 == 0, last = k0 + steps == depth;
    const auto tile_pass = [&]<std::size_t Rows, std::size_t Vectors, std::size_t Real>(std::size_t row0, std::size_t p) TL_WIDE_VECTORS {
      register_tile<T, Rows, Vectors> tile;
      T* part = partial + row0 * stride + p * panel;
      if (!first)
        for (std::size_t r = 0; r < Rows; ++r)
          for (std::size_t j = 0; j < Vectors; ++j) tile.v[r][j] = load(part + r * stride + j * L);
      multiply_add<Operands>(tile, a + row0 * Operands::a_block_row + k0 * Operands::a_step,
                             b + p * Operands::b_panel + k0 * Operands::b_step, steps, !first);
      if (last) {
        epilogue(row0, p * panel, tile, std::integral_constant<std::size_t, Real>{});
      } else {
        for (std::size_t r = 0; r < Rows; ++r)
          for (std::size_t j = 0; j < Vectors; ++j) store(part + r * stride + j * L, tile.v[r][j]);
      }
    };
    const auto panel_pass = [&]<std::size_t Vectors, std::size_t Real>(std::size_t p) TL_WIDE_VECTORS {
      for (std::size_t rows = 0; rows < row_blocks; ++rows) tile_pass.template operator()<R, Vectors, Real>(rows * R, p);
      if constexpr (TailRows > 0) tile_pass.template operator()<TailRows, Vectors, Real>(row_blocks * R, p);
    };
    if constexpr (full_panels > 0)  // (a loop to 0 is a warning for nvcc)
      for (std::size_t p = 0; p < full_panels; ++p) panel_pass.template operator()<tile_vectors, panel>(p);
    if constexpr (edge_columns > 0)
      panel_pass.template operator()<(edge_columns + L - 1) / L, edge_columns>(full_panels);
  }
}

// The sum of a vector's lanes, in a fixed order (halves added pairwise, so the
// result does not depend on the compiler's choices), in registers: each half a vector
// type of its own, which g++ extracts with one instruction (through an array in
// memory, the scalar loads after a vector store stalled on store forwarding, and the
// sum took a third of a 2-32-1 step).
template <class T, std::size_t N>
struct lanes_of {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
};
template <class T, std::size_t N>
TL_INLINE T sum_halves(const typename lanes_of<T, N>::type& v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    typename lanes_of<T, N / 2>::type low, high;
    std::memcpy(&low, &v, sizeof low);
    std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
    return sum_halves<T, N / 2>(low + high);
  }
}
template <class T>
TL_INLINE T sum_lanes(const vec<T>& v) {
  return sum_halves<T, lanes<T>>(v);
}

}  // namespace tl::detail::simd
