// safetensors and .npy store IEEE 754 floats in little-endian byte order; tapeless copies
// them with memcpy, which is only right when the host stores floats the same way. Every
// platform tapeless targets does, so this is checked at compile time, not byte-swapped.
#pragma once

#include <bit>
#include <limits>

static_assert(std::endian::native == std::endian::little, "tapeless io: safetensors and .npy need a little-endian host");
static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "tapeless io: float and double must be IEEE 754 binary32 and binary64");
