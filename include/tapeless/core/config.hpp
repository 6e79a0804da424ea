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
