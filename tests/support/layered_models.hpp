// Models the layered GPU path's tests share.
#pragma once

#include "tapeless/tapeless.hpp"

namespace tl_test {

// Issue 8's model (2-128-128-128-1, silu): too large for the tiled kernels' shared
// memory, so the automatic choice takes the layered path.
inline auto issue_model() {
  return tl::chain(tl::dense<2, 128>(tl::silu), tl::dense<128, 128>(tl::silu), tl::dense<128, 128>(tl::silu),
                   tl::dense<128, 1>());
}

}  // namespace tl_test
