// tapeless with the CUDA backend: everything in tapeless.hpp plus devices, device
// batches and the fused GPU training path. Only for translation units built by nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "tapeless/cuda.hpp needs nvcc; include tapeless/tapeless.hpp for the CPU path"
#endif

#include "tapeless/tapeless.hpp"
#include "tapeless/cuda/device.hpp"
#include "tapeless/cuda/device_buffer.hpp"
#include "tapeless/cuda/errors.hpp"
#include "tapeless/cuda/evaluate.hpp"
#include "tapeless/cuda/train.hpp"
#include "tapeless/cuda/wrong_calls.hpp"
