// Whether a loader accepts NaN and infinities. Rejecting them is the default: a NaN in a
// data set or checkpoint almost always means a broken file, and it would otherwise
// surface much later as a NaN loss.
#pragma once

#include "tapeless/core/finite.hpp"  // first_non_finite, for values in memory

namespace tl {

enum class non_finite_values { reject, allow };

}  // namespace tl
