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

// The blocked pass's products (simd::multiply and its tile lambdas, which hold the
// epilogues' activation loops) carry this: with AVX-512, g++ then vectorizes their
// loops 512 bits wide even without -mprefer-vector-width=512. Its default on these
// CPUs is 256 while the register tiles are 512-bit vectors, and a build with
// -march=native alone ran the blocked pass 1.6-2.1x slower (docs/performance.md,
// 2026-12-07 latest). Only there: on the lane pass's loop and the optimizer's update it
// made some steps slower in such a build (512-bit arithmetic on lane groups that g++
// copies as two 256-bit halves without -mmove-max=512, and out-of-line callees left at
// 256). g++ inlines an attributed function into a plain caller and drops the attribute,
// so it marks functions that stay out of line. g++ on x86-64 only: clang ignores the
// attribute, and nvcc's front end is not given it (the CPU loops of a .cu file keep
// the width its -Xcompiler flags ask for; the project's own pass -mprefer-vector-width=512).
// Define TL_WIDE_VECTORS empty before including tapeless to keep the compiler's width.
#ifndef TL_WIDE_VECTORS
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define TL_WIDE_VECTORS __attribute__((target("prefer-vector-width=512")))
#else
#define TL_WIDE_VECTORS
#endif
#endif
