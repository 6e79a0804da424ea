// This machine's fp32 FMA peak, measured: 12 independent chains of vfmadd231ps on
// zmm (AVX-512) or ymm (AVX2) registers per thread, written in assembly so that the
// compiler cannot change them, on 1 thread and on every core. The fractions of peak
// in docs/performance.md divide by the all-cores zmm figure.
//   build/bench/fma_peak
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__AVX512F__)
#define TWELVE_FMAS(R)                                                                                   \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "0\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "1\n\t"      \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "2\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "3\n\t"      \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "4\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "5\n\t"      \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "6\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "7\n\t"      \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "8\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "9\n\t"      \
  "vfmadd231ps %%" R "30, %%" R "31, %%" R "10\n\t vfmadd231ps %%" R "30, %%" R "31, %%" R "11\n\t"
#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"

// GFLOP/s of one thread: 12 FMAs of `lanes` floats, 2 FLOP each, per iteration.
double zmm_gflops(long iterations) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) asm volatile(TWELVE_FMAS("zmm")::: CLOBBERS);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(iterations) * 12 * 16 * 2 / s / 1e9;
}
double ymm_gflops(long iterations) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) asm volatile(TWELVE_FMAS("ymm")::: CLOBBERS);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(iterations) * 12 * 8 * 2 / s / 1e9;
}

int main() {
  const long iterations = 100'000'000;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (int run = 0; run < 3; ++run) {
    const double one = zmm_gflops(iterations), one_ymm = ymm_gflops(iterations);
    std::vector<double> each(cores);
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < cores; ++t) threads.emplace_back([&, t] { each[t] = zmm_gflops(iterations); });
    each[0] = zmm_gflops(iterations);
    for (auto& t : threads) t.join();
    double all = 0;
    for (double g : each) all += g;
    std::printf("fp32 FMA: 1 thread %.1f GFLOP/s (zmm), %.1f (ymm); %u threads %.1f GFLOP/s (zmm)\n", one, one_ymm,
                cores, all);
  }
}
#else
int main() { std::printf("fma_peak: written for x86-64 with AVX-512 (build with -march=native there)\n"); }
#endif
