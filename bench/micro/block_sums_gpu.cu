// An A/B, in one run on one GPU, of CUB against the hand-written reductions of the
// training kernels (cuda/kernels.hpp); docs/design.md, "CUB and hand-written
// reductions", says what each variant stands for and holds the numbers.
//   build-gpu/bench/micro_block_sums_gpu --benchmark_min_time=0.2
// (Google Benchmark 1.7 takes plain seconds and rejects "0.2s"; 1.8 takes both.)
// BM_block_sums: partial_sums_kernel's block sums after accumulate_samples, N = P + 1
// registers a thread into one row a block: the library's warp_sums_to_shared +
// warp_row_total against cub::WarpReduce (then the same warp_row_total) and
// cub::BlockReduce (three algorithms), each called once per entry.
// BM_column_sums: reduce_update_kernel's column sums of R row-major rows of P columns:
// the kernel itself against cub::DeviceSegmentedReduce::Sum, a segment per column,
// through a strided view of the same rows and on a column-major copy (made outside
// the timing: CUB's best case).
// Times are per launch: the mean of launches replayed as one CUDA graph (as training
// replays its steps) between two cudaEvents. Each benchmark first checks its sums
// against float64 host sums and fails (SkipWithError) on a difference: no wrong winner.
#include <benchmark/benchmark.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpu_timing.hpp"
#include "run_registered.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/kernels.hpp"

namespace {

namespace gpu = tl::detail::gpu;
using gpu_timing::device_buffer, gpu_timing::guarded, gpu_timing::poison, gpu_timing::time_launches;
using T = float;

// False, and the benchmark failed, where a sum is off its float64 value by more than `tolerance`.
bool sum_matches(benchmark::State& state, const std::string& where, double got, double want, double tolerance) {
  if (std::abs(got - want) <= tolerance) return true;
  const std::string message = "wrong sum, " + where + ": " + std::to_string(got) + ", float64 " + std::to_string(want);
  state.SkipWithError(message.c_str());
  return false;
}

// ---- Block sums: N per-thread registers into one row per block.

enum class variant { hand_written, cub_warp_reduce, cub_block_warp_reductions, cub_block_raking,
                     cub_block_raking_commutative };

constexpr int blocks = 1024;

// Thread t's entry j: base_t (j % 7 + 1) + j / 4, base_t a multiple of 1/8 in [-4, 4)
// read from memory, so nothing folds. Every entry and every partial sum of up to 256
// of them is a multiple of 1/8 below 2^16 in size: exact in float in any order, so
// every variant must match the float64 sum to its rounding (none).
__host__ __device__ inline T entry(T base, std::size_t j) { return base * T(j % 7 + 1) + T(j) * T(0.25); }
inline T thread_base(std::size_t i) { return T(int((std::uint32_t(i) * 2654435761u) >> 26) - 32) / T(8); }

template <variant V>
constexpr cub::BlockReduceAlgorithm block_algorithm =
    V == variant::cub_block_warp_reductions ? cub::BLOCK_REDUCE_WARP_REDUCTIONS
    : V == variant::cub_block_raking        ? cub::BLOCK_REDUCE_RAKING
                                            : cub::BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY;

// `samples` is 1, but not known to the compiler: as after accumulate_samples' loop, all
// N sums are live at once, where a known count would let it recompute each entry only
// where it is reduced (fewer registers for the one-entry-at-a-time variants).
template <variant V, int Threads, std::size_t N>
__global__ void __launch_bounds__(Threads) block_sums_kernel(const T* bases, int samples, T* rows) {
  constexpr int warps = Threads / gpu::warp_size;
  T acc[N] = {};
  for (int s = 0; s < samples; ++s) {
    const T base = bases[(std::size_t(s) * gridDim.x + blockIdx.x) * Threads + threadIdx.x];
#pragma unroll
    for (std::size_t j = 0; j < N; ++j) acc[j] += entry(base, j);
  }
  T* out = rows + std::size_t(blockIdx.x) * N;
  if constexpr (V == variant::hand_written || V == variant::cub_warp_reduce) {
    __shared__ T scratch[warps * gpu::padded_sums<N>];  // partial_sums_kernel's layout
    if constexpr (V == variant::hand_written) {
      gpu::warp_sums_to_shared(acc, scratch);
    } else {
      using warp_reduce = cub::WarpReduce<T>;
      // A TempStorage per entry: CUB asks for a __syncwarp before one is reused. With
      // shuffles one is an unused byte, so this costs no barrier and N bytes a warp.
      __shared__ typename warp_reduce::TempStorage temp[warps][N];
      const int lane = threadIdx.x % gpu::warp_size, warp = threadIdx.x / gpu::warp_size;
#pragma unroll
      for (std::size_t j = 0; j < N; ++j) {
        const T s = warp_reduce(temp[warp][j]).Sum(acc[j]);
        if (lane == 0) scratch[warp * gpu::padded_sums<N> + j] = s;
      }
    }
    __syncthreads();
    for (std::size_t j = threadIdx.x; j < N; j += Threads) out[j] = gpu::warp_row_total<N>(scratch, j);
  } else {
    using block_reduce = cub::BlockReduce<T, Threads, block_algorithm<V>>;
    using storage = typename block_reduce::TempStorage;
    // CUB asks for a barrier before a TempStorage is reused: with a ring of them (up to
    // 16 KiB), one barrier every `ring` entries instead of one per entry.
    constexpr std::size_t fit = 16384 / sizeof(storage), ring = fit < 1 ? 1 : fit > N ? N : fit;
    __shared__ storage temp[ring];
    __shared__ T row[N];
#pragma unroll
    for (std::size_t j = 0; j < N; ++j) {
      if (j > 0 && j % ring == 0) __syncthreads();
      const T s = block_reduce(temp[j % ring]).Sum(acc[j]);  // valid in thread 0
      if (threadIdx.x == 0) row[j] = s;
    }
    __syncthreads();
    for (std::size_t j = threadIdx.x; j < N; j += Threads) out[j] = row[j];
  }
}

template <variant V, int Threads, std::size_t N>
void block_sums(benchmark::State& state) {
  guarded(state, [&] {
    std::vector<T> bases(std::size_t(blocks) * Threads);
    for (std::size_t i = 0; i < bases.size(); ++i) bases[i] = thread_base(i);
    device_buffer<T> d_bases(bases.size()), d_rows(std::size_t(blocks) * N);
    TL_CUDA_CHECK(cudaMemcpy(d_bases.get(), bases.data(), bases.size() * sizeof(T), cudaMemcpyHostToDevice));
    poison(d_rows);
    const auto launch = [&](cudaStream_t stream) {
      block_sums_kernel<V, Threads, N><<<blocks, Threads, 0, stream>>>(d_bases.get(), 1, d_rows.get());
    };
    launch(nullptr);
    TL_CUDA_CHECK(cudaGetLastError());
    TL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<T> rows = d_rows.to_host();
    // float64 sums by linearity: sum_t entry(base_t, j) = (sum_t base_t) (j % 7 + 1) + Threads j / 4.
    const double tolerance = 1e-6 * Threads * (4.0 * 7 + 0.25 * N);  // rounding of a float sum; here 0
    for (int b = 0; b < blocks; ++b) {
      double base_sum = 0;
      for (int t = 0; t < Threads; ++t) base_sum += bases[std::size_t(b) * Threads + t];
      for (std::size_t j = 0; j < N; ++j) {
        const double want = base_sum * double(j % 7 + 1) + Threads * 0.25 * double(j), got = rows[b * N + j];
        if (!sum_matches(state, "block " + std::to_string(b) + " entry " + std::to_string(j), got, want, tolerance))
          return;
      }
    }
    time_launches(state, 20, launch);
  });
}

// ---- Column sums: R rows of P columns into P sums.

// Row r, column c: a(r) + b(c), multiples of 1/64 in [0.25, 8.25) (b hashes c, so
// columns differ); sums of up to 8192 of them stay below 2^17: exact in float.
__host__ __device__ inline T row_part(long long r) { return T((r * 7) % 17 + 1) * T(0.25); }
__host__ __device__ inline T column_part(long long c) {
  return T((std::uint32_t(c) * 2654435761u) >> 24) * T(1.0 / 64);
}

__global__ void fill_columns(T* data, long long rows, long long columns, bool column_major) {
  const long long n = rows * columns;
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    const long long r = column_major ? k % rows : k / columns, c = column_major ? k / rows : k % columns;
    data[k] = row_part(r) + column_part(c);
  }
}

// One (R, P)'s input in one layout, kept for the variants of that size (registered side
// by side): at R = 8192, P = 2^20 a layout is 32 GiB, so only one is held at a time.
const T* column_input(long long rows, long long columns, bool column_major) {
  static device_buffer<T> data;
  static long long held_rows = 0, held_columns = 0;
  static bool held_column_major = false;
  if (held_rows == rows && held_columns == columns && held_column_major == column_major) return data.get();
  data = device_buffer<T>();
  held_rows = 0;
  const std::size_t bytes = std::size_t(rows * columns) * sizeof(T);
  std::size_t free = 0, total = 0;
  TL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (bytes + (std::size_t(1) << 30) > free)
    throw std::runtime_error("needs " + std::to_string(bytes >> 20) + " MiB of device memory and 1 GiB spare, " +
                             std::to_string(free >> 20) + " MiB free");
  data = device_buffer<T>(std::size_t(rows * columns));
  fill_columns<<<4096, 256>>>(data.get(), rows, columns, column_major);
  TL_CUDA_CHECK(cudaGetLastError());
  TL_CUDA_CHECK(cudaDeviceSynchronize());
  held_rows = rows, held_columns = columns, held_column_major = column_major;
  return data.get();
}

enum class column_variant { hand_written, cub_segmented_strided, cub_segmented_column_major };

// All reduce_update_kernel asks of a model.
template <std::size_t P>
struct column_model { static constexpr std::size_t parameter_count = P; };

// The partials view reduce_update_kernel reads (kernels.hpp, block_partials): here R
// row-major rows of P gradient columns and no loss rows, the loss and flag sums not
// being what is compared.
struct row_major_partials {
  const T* p;
  std::size_t columns;
  int rows;
  __device__ int loss_rows() const { return 0; }
  __device__ T loss(int) const { return T(0); }
  __device__ T flag(int) const { return T(0); }
  __device__ gpu::partial_column<T> column(std::size_t j) const { return {p + j, columns, rows}; }
};

// Element i of the column-major order read from the row-major data: row i % R, column
// i / R (R a power of two, so a mask and a shift).
struct strided_column_view {
  const T* p;
  long long columns, row_mask;
  int row_shift;
  __host__ __device__ T operator()(long long i) const { return p[(i & row_mask) * columns + (i >> row_shift)]; }
};
struct segment_start {
  long long rows;
  __host__ __device__ long long operator()(long long s) const { return s * rows; }
};

template <class In, class Offsets>
void segmented_sum(void* temp, std::size_t& temp_bytes, In in, T* out, long long columns, Offsets offsets,
                   cudaStream_t stream) {
  TL_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out, columns, offsets, offsets + 1, stream));
}

template <column_variant V, int R, std::size_t P>
void column_sums(benchmark::State& state) {
  static_assert((R & (R - 1)) == 0, "the strided view divides by R with a shift");
  guarded(state, [&] {
    const T* input = column_input(R, P, V == column_variant::cub_segmented_column_major);
    device_buffer<T> grad(P), loss(1);
    poison(grad);
    const auto offsets = thrust::make_transform_iterator(thrust::counting_iterator<long long>(0), segment_start{R});
    const auto strided = thrust::make_transform_iterator(
        thrust::counting_iterator<long long>(0), strided_column_view{input, (long long)P, R - 1, __builtin_ctz(R)});
    // CUB's temporary storage, sized and allocated once, outside the timing.
    std::size_t temp_bytes = 0;
    if constexpr (V == column_variant::cub_segmented_strided)
      segmented_sum(nullptr, temp_bytes, strided, grad.get(), P, offsets, nullptr);
    if constexpr (V == column_variant::cub_segmented_column_major)
      segmented_sum(nullptr, temp_bytes, input, grad.get(), P, offsets, nullptr);
    device_buffer<unsigned char> temp(temp_bytes);
    const auto launch = [&](cudaStream_t stream) {
      if constexpr (V == column_variant::hand_written)
        gpu::launch_reduce_update<column_model<P>, tl::sgd, T>(row_major_partials{input, P, R}, T(1), loss.get(),
                                                               grad.get(), tl::sgd{}, nullptr, nullptr, nullptr,
                                                               nullptr, nullptr, stream);
      else if constexpr (V == column_variant::cub_segmented_strided)
        segmented_sum(temp.get(), temp_bytes, strided, grad.get(), P, offsets, stream);
      else
        segmented_sum(temp.get(), temp_bytes, input, grad.get(), P, offsets, stream);
    };
    launch(nullptr);
    TL_CUDA_CHECK(cudaGetLastError());
    TL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<T> sums = grad.to_host();
    double row_total = 0;  // float64 sums by linearity: sum_r (a(r) + b(c)) = sum_r a(r) + R b(c)
    for (long long r = 0; r < R; ++r) row_total += row_part(r);
    const double tolerance = 1e-6 * R * 8.25;  // rounding of a float sum; here 0
    for (std::size_t c = 0; c < P; ++c) {
      const double want = row_total + R * double(column_part(c)), got = sums[c];
      if (!sum_matches(state, "column " + std::to_string(c), got, want, tolerance)) return;
    }
    // Up to 20 launches a graph, fewer where one launch reads 256 MiB or more.
    const long long elements = (long long)R * P;
    time_launches(state, int(std::max(1LL, std::min(20LL, (1LL << 26) / elements))), launch);
    state.counters["bytes/s"] = benchmark::Counter(double(elements) * sizeof(T),
                                                   benchmark::Counter::kIsIterationInvariantRate,
                                                   benchmark::Counter::kIs1024);
  });
}

// ---- Registration: the variants of one size side by side, so the output reads as an A/B.
template <class F>
void add(const std::string& name, F* f) {
  benchmark::RegisterBenchmark(name.c_str(), f)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

template <int Threads, std::size_t P>
void register_block_sums() {
  constexpr std::size_t N = P + 1;
  const std::string size = "/P:" + std::to_string(P) + "/threads:" + std::to_string(Threads);
  add("BM_block_sums/hand_written" + size, block_sums<variant::hand_written, Threads, N>);
  add("BM_block_sums/cub_warp_reduce" + size, block_sums<variant::cub_warp_reduce, Threads, N>);
  add("BM_block_sums/cub_block_reduce_warp_reductions" + size,
      block_sums<variant::cub_block_warp_reductions, Threads, N>);
  add("BM_block_sums/cub_block_reduce_raking" + size, block_sums<variant::cub_block_raking, Threads, N>);
  add("BM_block_sums/cub_block_reduce_raking_commutative" + size,
      block_sums<variant::cub_block_raking_commutative, Threads, N>);
}

template <int R, std::size_t P>
void register_column_sums() {
  const std::string size = "/R:" + std::to_string(R) + "/P:" + std::to_string(P);
  add("BM_column_sums/hand_written" + size, column_sums<column_variant::hand_written, R, P>);
  add("BM_column_sums/cub_segmented_strided" + size, column_sums<column_variant::cub_segmented_strided, R, P>);
  add("BM_column_sums/cub_segmented_column_major" + size,
      column_sums<column_variant::cub_segmented_column_major, R, P>);
}

}  // namespace

int main(int argc, char** argv) {
  [&]<std::size_t... P>(std::index_sequence<P...>) {
    ((register_block_sums<256, P>(), register_block_sums<128, P>()), ...);
  }(std::index_sequence<17, 49, 129, 257, 513>{});
  [&]<int... R>(std::integer_sequence<int, R...>) {
    ((register_column_sums<R, 4096>(), register_column_sums<R, std::size_t(1) << 20>()), ...);
  }(std::integer_sequence<int, 64, 1024, 8192>{});
  return bench::run_registered(argc, argv, "block sums and column sums: tapeless' hand-written reductions vs CUB");
}
