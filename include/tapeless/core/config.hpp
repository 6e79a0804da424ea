// Portability macros shared by the CPU and CUDA paths.
#pragma once

#if defined(__CUDACC__)
// Every function that the fused kernels may call carries this; a missing
// annotation must be a compile error, never a silent host fallback.
#define TL_HD __host__ __device__
#define TL_DEVICE_COMPILER 1
#else
#define TL_HD
#define TL_DEVICE_COMPILER 0
#endif

#if defined(__CUDA_ARCH__)
#define TL_ON_DEVICE 1
#else
#define TL_ON_DEVICE 0
#endif

#define TL_INLINE inline __attribute__((always_inline))

// The CPU passes' per-thread functions (the blocked pass's chunk loop and its products,
// the lane pass's sample loop, the optimizer's update) carry this: with AVX-512, g++
// then vectorizes their loops, and those of everything inlined into them, 512 bits
// wide even without -mprefer-vector-width=512. Its default on these CPUs is 256, while
// the register tiles are 512-bit vectors, and a build with -march=native alone trained
// one-hidden-layer models 1.3-2.1x slower (docs/performance.md, 2026-12-07 latest).
// g++ on x86-64 only (clang has no such target attribute; nvcc's host pass runs no hot
// CPU loop). Never on an always_inline function: g++ refuses to inline a function with
// other target options into one without them.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define TL_WIDE_VECTORS __attribute__((target("prefer-vector-width=512")))
#else
#define TL_WIDE_VECTORS
#endif
