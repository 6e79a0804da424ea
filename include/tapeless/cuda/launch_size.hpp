// How many blocks a grid-stride kernel is launched with: `per_block` elements a block
// (one a thread for element-wise kernels; a row a warp or a group of threads for
// others) up to a cap, past which each block loops. The cap (8192 blocks) fills an
// H100 or H200 several times over, so a larger grid would only add blocks that wait.
// The library's element-wise, per-sample and per-row kernels take their size from
// here; the products', the sums' and the one-block kernels size their grids by their
// own tiles.
#pragma once

#include <cstddef>

namespace tl::detail::gpu {

inline constexpr std::size_t most_grid_stride_blocks = 8192;

inline unsigned grid_stride_blocks(std::size_t count, std::size_t per_block = 256) {
  const std::size_t blocks = (count + per_block - 1) / per_block;
  return unsigned(blocks < most_grid_stride_blocks ? blocks : most_grid_stride_blocks);
}

}  // namespace tl::detail::gpu
