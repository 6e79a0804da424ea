// Which CPU pass trains a model. Two exist:
//   lanes    16 samples at a time through the layer protocol, lane-major, gradients per
//            lane (cpu/batch.hpp): any model; the fastest for narrow ones (the seed fit).
//   blocked  chunks of samples layer by layer, dense layers as register-blocked matrix
//            products (cpu/blocked_chain.hpp), other layers (layer_norm, skip, a
//            user's) through their own code: several times faster once the hidden
//            dense layers are wide.
// The choice comes from the model's type: blocked for a model with two or more dense
// layers whose hidden ones (every dense layer but the last) are all at least
// blocked_min_width wide (blocked_min_width_deep with three or more dense layers),
// unless the model is one hidden layer of thin products (thin_one_hidden_layer),
// lanes otherwise. It
// can be overridden per model type, by specializing cpu_pass_for:
//   template <> inline constexpr tl::cpu_pass tl::cpu_pass_for<decltype(net)> = tl::cpu_pass::lanes;
// or for a whole run by the environment: TAPELESS_CPU_PASS=lanes (`blocked` leaves the
// type's choice; any other value is an error the first step reports). The choice a
// type makes: tl::cpu_pass_of<Model>.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/core/environment.hpp"
#include "tapeless/nn/stages.hpp"

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

// A model of one hidden layer and nothing else (two dense layers) with at most this
// many weights, In W + W Out, takes the lane pass whatever its width: such products
// (a curve fit's 1-64-1, 2-32-1) have a reduction of 1-3 terms at one end, so the
// blocked pass's tiles are mostly its writes and reads of the chunk's activations,
// while the lane pass keeps a unit's whole path in registers. Measured on both CPUs
// of docs/performance.md (2026-12-07, midday; bench/cpu/one_hidden_layer_step.cpp):
// 1-32..96-1, 2-32..64-1, 1-64-2, 3-32-1 and 2-48-2 ran 0.71-0.97x the blocked pass's
// time on lanes on 2 cores, 0.50-1.07x on 16 (most cells 0.6-0.9), while 2-96-1,
// 3-64-1 and 2-64-2 (256-288 weights) were even (0.84-1.18x) and 4-64-3, 8-64-1 and
// wider first layers 1.02-3.4x slower on lanes.
inline constexpr std::size_t lanes_max_one_hidden_weights = 192;

// The blocked pass can run the model: two or more dense layers, anywhere in it.
template <class Model>
inline constexpr bool blocked_pass_runs = dense_stage_count<stages_of<std::remove_cv_t<Model>>>() >= 2;

template <class Model>
constexpr bool hidden_layers_wide() {
  using stages = stages_of<Model>;
  constexpr std::size_t dense = dense_stage_count<stages>();
  constexpr std::size_t least = dense >= 3 ? blocked_min_width_deep : blocked_min_width;
  return []<std::size_t... I>(std::index_sequence<I...>) {
    std::size_t seen = 0;
    bool wide = true;
    const auto hidden_is_wide = [&](stage_kind kind, std::size_t outputs) {
      if (kind == stage_kind::dense && ++seen < dense) wide = wide && outputs >= least;
    };
    (hidden_is_wide(std::tuple_element_t<I, stages>::kind, std::tuple_element_t<I, stages>::outputs), ...);
    return wide;
  }(std::make_index_sequence<stage_count<stages>>{});
}

template <class Model>
constexpr bool thin_one_hidden_layer() {
  using stages = stages_of<Model>;
  if constexpr (stage_count<stages> != 2 || dense_stage_count<stages>() != 2) {
    return false;
  } else {
    using hidden = std::tuple_element_t<0, stages>;
    using last = std::tuple_element_t<1, stages>;
    return hidden::inputs * hidden::outputs + last::inputs * last::outputs <= lanes_max_one_hidden_weights;
  }
}

template <class Model>
constexpr cpu_pass pass_by_type() {
  if constexpr (!blocked_pass_runs<Model>) return cpu_pass::lanes;
  else if constexpr (cpu_pass_for<std::remove_cv_t<Model>> != cpu_pass::automatic) return cpu_pass_for<std::remove_cv_t<Model>>;
  else return hidden_layers_wide<Model>() && !thin_one_hidden_layer<Model>() ? cpu_pass::blocked : cpu_pass::lanes;
}

// TAPELESS_CPU_PASS=lanes, read once: the lane pass for every model. A value that is
// neither lanes nor blocked is a typo that would silently time the wrong pass: an
// error (std::invalid_argument), thrown before the step changes anything.
inline bool lanes_forced_by_environment() {
  static const bool forced = environment_switch("TAPELESS_CPU_PASS", "lanes", "blocked");
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
// Only call it where blocked_pass_compiled<Model, Requested>() holds. (Its callers,
// cpu/batch.hpp's step and apply, read the variable first for every model, so that a
// typo in it is reported whichever pass runs.)
template <class Model, cpu_pass Requested>
bool runs_blocked_pass() {
  static_assert(blocked_pass_compiled<Model, Requested>());
  return Requested == cpu_pass::blocked || !lanes_forced_by_environment();
}

}  // namespace detail

// The pass a model type trains on (cpu_pass::lanes or cpu_pass::blocked), after any
// cpu_pass_for override; TAPELESS_CPU_PASS=lanes still sends a run to the lane pass.
template <class Model>
inline constexpr cpu_pass cpu_pass_of = detail::pass_by_type<std::remove_cvref_t<Model>>();

}  // namespace tl
