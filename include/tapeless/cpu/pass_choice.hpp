// Which CPU pass trains a model. Two exist:
//   lanes    16 samples at a time through the layer protocol, lane-major, gradients per
//            lane (cpu/batch.hpp): any model; the fastest for narrow ones (the seed fit).
//   blocked  chunks of samples layer by layer as register-blocked matrix products
//            (cpu/blocked_chain.hpp): chains of dense layers only, several times faster
//            once the hidden layers are wide.
// The choice comes from the model's type: blocked for a chain of two or more dense
// layers whose hidden widths are all at least blocked_min_width (blocked_min_width_deep
// for three or more layers), lanes otherwise. It
// can be overridden per model type, by specializing cpu_pass_for:
//   template <> inline constexpr tl::cpu_pass tl::cpu_pass_for<decltype(net)> = tl::cpu_pass::lanes;
// or for a whole run by the environment: TAPELESS_CPU_PASS=lanes (or blocked, which
// applies to models the blocked pass can run and is ignored for others).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tapeless/nn/dense_chain.hpp"

namespace tl {

enum class cpu_pass { automatic, lanes, blocked };

template <class Model>
inline constexpr cpu_pass cpu_pass_for = cpu_pass::automatic;

namespace detail {

// Hidden widths from which the blocked pass is chosen: below, a register tile of 32
// columns (AVX-512) is mostly padding and the lane pass is as fast (docs/performance.md).
inline constexpr std::size_t blocked_min_width = 32;
// ... and from 16 in chains with a hidden-to-hidden product (three or more layers):
// there the blocked pass measured 1.2-2.3x faster than the lane pass at widths 16 and
// 24, while 2-16-1 (no such product) and width 8 stay faster in lanes.
inline constexpr std::size_t blocked_min_width_deep = 16;

// The blocked pass can run the model: a chain of two or more dense layers.
template <class Model>
inline constexpr bool blocked_pass_runs = [] {
  if constexpr (is_dense_chain<std::remove_cv_t<Model>>::value) return std::remove_cv_t<Model>::depth >= 2;
  else return false;
}();

template <class Model>
constexpr bool hidden_layers_wide() {
  constexpr std::size_t least = Model::depth >= 3 ? blocked_min_width_deep : blocked_min_width;
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return ((Model::template layer_type<I>::outputs >= least) && ...);
  }(std::make_index_sequence<Model::depth - 1>{});
}

template <class Model>
constexpr cpu_pass pass_by_type() {
  if constexpr (!blocked_pass_runs<Model>) return cpu_pass::lanes;
  else if constexpr (cpu_pass_for<std::remove_cv_t<Model>> != cpu_pass::automatic) return cpu_pass_for<std::remove_cv_t<Model>>;
  else return hidden_layers_wide<Model>() ? cpu_pass::blocked : cpu_pass::lanes;
}

// TAPELESS_CPU_PASS=lanes, read once: the lane pass for every model.
inline bool lanes_forced_by_environment() {
  static const bool forced = [] {
    const char* env = std::getenv("TAPELESS_CPU_PASS");
    return env && std::strcmp(env, "lanes") == 0;
  }();
  return forced;
}

// Whether the blocked pass is compiled for this model: when asked for (`Requested`,
// a caller's such as a test's), or by the type. Only then is it instantiated, so a
// model that never takes it (the seed fit) costs no build time for it.
template <class Model, cpu_pass Requested>
constexpr bool blocked_pass_compiled() {
  if constexpr (!blocked_pass_runs<Model>) return false;
  else if constexpr (Requested != cpu_pass::automatic) return Requested == cpu_pass::blocked;
  else return pass_by_type<Model>() == cpu_pass::blocked;
}

// Whether this run takes the blocked pass: compiled for it, and not sent to the lane
// pass by TAPELESS_CPU_PASS=lanes unless the caller asked for the blocked pass by name.
// Only call it where blocked_pass_compiled<Model, Requested>() holds.
template <class Model, cpu_pass Requested>
bool runs_blocked_pass() {
  static_assert(blocked_pass_compiled<Model, Requested>());
  return Requested == cpu_pass::blocked || !lanes_forced_by_environment();
}

}  // namespace detail
}  // namespace tl
