// main() of a GPU test binary: exits 77 (skipped) where no GPU is usable, so CI,
// which compiles every CUDA source with nvcc but has no GPU, reports a skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

#include "tapeless/cuda.hpp"

int main(int argc, char** argv) {
  if (tl::cuda_device_count() == 0) {
    std::printf("no CUDA device usable here: GPU tests compiled, not run (skipped)\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
