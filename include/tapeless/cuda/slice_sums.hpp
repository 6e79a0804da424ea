// The layered path's per-slice partial sums added into the gradient. The kernels that
// make a gradient while writing something else (the input-delta kernels: each layer's
// bias; the fused first layer's kernel: its weights and biases, and the second layer's
// weights) leave one row of partial sums per slice of a chunk's samples, in the
// gradient's order; one launch a chunk adds every such row, in a fixed order.
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tl::detail::gpu {

// Where slice_sums_kernel finds and puts each run of gradient entries (a plain
// aggregate: device code sees no Hana): `runs` entries of at most `Capacity`, each
// `width` consecutive gradient values from `gradient_offset`, its partial rows
// (`slices` of them, `width` apart) from `partial_offset`.
template <std::size_t Capacity>
struct slice_sums_table {
  std::size_t runs = 0, entries = 0;  // entries: the widths' total
  std::size_t width[Capacity], gradient_offset[Capacity], partial_offset[Capacity];
  unsigned slices[Capacity];

  void add(std::size_t run_width, std::size_t to, std::size_t from, std::size_t slice_count) {
    if (runs == Capacity) throw std::logic_error("tapeless: slice_sums_table holds " + std::to_string(Capacity) + " runs");
    width[runs] = run_width;
    gradient_offset[runs] = to;
    partial_offset[runs] = from;
    slices[runs] = unsigned(slice_count);
    ++runs;
    entries += run_width;
  }
};

// One warp a gradient entry: its lanes add the slices' partial sums in a fixed order,
// then cub::WarpReduce adds the lanes (deterministic: the same shuffles every time);
// the total goes to the gradient, added to it when `accumulate` (a later chunk).
template <std::size_t Capacity, class T>
__global__ void slice_sums_kernel(slice_sums_table<Capacity> table, const T* partials, T* gradient, bool accumulate) {
  using warp_reduce = cub::WarpReduce<T>;
  __shared__ typename warp_reduce::TempStorage storage[8];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::size_t entry = blockIdx.x * std::size_t(8) + warp; entry < table.entries;
       entry += std::size_t(gridDim.x) * 8) {
    std::size_t run = 0, j = entry;
    while (j >= table.width[run]) j -= table.width[run++];
    const T* column = partials + table.partial_offset[run] + j;
    T sum = T(0);
    for (unsigned b = lane; b < table.slices[run]; b += 32) sum += column[std::size_t(b) * table.width[run]];
    sum = warp_reduce(storage[warp]).Sum(sum);
    if (lane == 0) {
      T& g = gradient[table.gradient_offset[run] + j];
      g = accumulate ? g + sum : sum;
    }
  }
}

}  // namespace tl::detail::gpu
