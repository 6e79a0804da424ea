// Optimizers, each exactly its published update rule (PyTorch's torch.optim forms,
// which Optimisers.jl matches). An optimizer is plain data (hyperparameters in
// double, used at the parameters' precision); its per-parameter state lives in
// `state_slots` arrays beside the parameters, and `update` is one element's step, so
// the CPU loop and the CUDA kernels share it. The protocol: state_slots,
// at_step<T>(t) -> constants<T> (everything that depends only on the step t, from
// 1), and update(constants, p, g, state...) for one parameter; optionally
// generic_update = true where update is one rule for any T, so that the CPU may run
// it on 16 parameters at once (optimizer_takes_lanes below); optionally check(),
// which throws std::invalid_argument for settings the rule cannot take (every step
// calls it first: check_settings below).
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tapeless/core/lanes.hpp"
#include "tapeless/core/math.hpp"

namespace tl {

namespace detail {
// The settings PyTorch refuses when an optimizer is built: a learning rate that is
// negative or not finite, betas outside [0, 1), a negative eps, momentum or weight
// decay. Taken, each made a step write NaN parameters (or run away) without an error,
// and the next step's non-finite loss was blamed on that step.
inline void require_setting(bool ok, const char* optimizer, const char* what, double value) {
  if (!ok) {
    char shown[32];  // %g: std::to_string printed -1e-07 as -0.000000
    std::snprintf(shown, sizeof shown, "%.9g", value);
    throw std::invalid_argument(std::string("tapeless::") + optimizer + ": " + what + ", got " + shown);
  }
}
inline bool finite_at_least_zero(double v) { return std::isfinite(v) && v >= 0; }
inline bool in_unit_interval(double v) { return v >= 0 && v < 1; }
}  // namespace detail

// v <- momentum v + g;  p <- p - lr v   (v starts at 0, so the first step is lr g)
struct sgd {
  double lr = 0.01;
  double momentum = 0.0;
  static constexpr const char* name = "sgd";
  static constexpr bool generic_update = true;  // update() is one rule for any T: lanes too
  static constexpr std::size_t state_slots = 1;
  static constexpr const char* slot_names[state_slots] = {"momentum_buffer"};  // PyTorch's names
  template <class T> struct constants { T lr, momentum; };
  template <class T> TL_HD constants<T> at_step(long) const { return {T(lr), T(momentum)}; }
  template <class T> TL_HD static void update(const constants<T>& c, T& p, T g, T& v) {
    v = c.momentum * v + g;
    p -= c.lr * v;
  }
  void check() const {
    detail::require_setting(detail::finite_at_least_zero(lr), name, "lr must be finite and >= 0", lr);
    detail::require_setting(detail::finite_at_least_zero(momentum), name, "momentum must be finite and >= 0", momentum);
  }
};

// m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
// p <- p - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
struct adam {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  static constexpr const char* name = "adam";
  static constexpr bool generic_update = true;
  static constexpr std::size_t state_slots = 2;
  static constexpr const char* slot_names[state_slots] = {"exp_avg", "exp_avg_sq"};  // PyTorch's names
  // PyTorch's single-tensor step (torch/optim/adam.py), its scalars formed in double
  // once a step as Python does: m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g,
  // value=1 - beta2); denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p.addcdiv_(m, denom,
  // value=-lr / (1 - beta1^t)), each with its own grouping. (1 - beta formed in float
  // from a float beta was 1.3e-5 off for 0.999: the first step 6.6e-6 relative off; and
  // three divisions a parameter, (m / bias1) / (sqrt(v / bias2) + eps), cost 2.6 ns a
  // float parameter on the host where this takes 0.6.) Fused multiply-adds, where the
  // compiler contracts, still differ from PyTorch's CPU kernels in the last bits.
  template <class T> struct constants {
    T beta2, one_minus_beta1, one_minus_beta2, eps, minus_step_size, sqrt_bias2, keep;
    bool lerp_from_m;  // 1 - beta1 < 1/2: lerp's first form (one branch for every lane)
  };
  template <class T> TL_HD constants<T> at_step(long t) const {  // t counts from 1
    return {T(beta2), T(1.0 - beta1), T(1.0 - beta2), T(eps), T(-lr / (1.0 - ::pow(beta1, double(t)))),
            T(::sqrt(1.0 - ::pow(beta2, double(t)))), T(1), float(1.0 - beta1) < 0.5f};
  }
  template <class T> TL_HD static void update(const constants<T>& c, T& p, T g, T& m, T& v) {
    p *= c.keep;  // AdamW's decoupled decay, p (1 - lr weight_decay); 1 for Adam
    // lerp: m + w (g - m) for a weight below 1/2, else g - (g - m)(1 - w) (ATen's)
    if (c.lerp_from_m) m = m + c.one_minus_beta1 * (g - m);
    else m = g - (g - m) * (T(1) - c.one_minus_beta1);
    v = v * c.beta2;
    v = v + c.one_minus_beta2 * g * g;
    p = p + c.minus_step_size * m / (math::sqrt(v) / c.sqrt_bias2 + c.eps);
  }
  void check(const char* who = name) const {
    detail::require_setting(detail::finite_at_least_zero(lr), who, "lr must be finite and >= 0", lr);
    detail::require_setting(detail::in_unit_interval(beta1), who, "beta1 must be in [0, 1)", beta1);
    detail::require_setting(detail::in_unit_interval(beta2), who, "beta2 must be in [0, 1)", beta2);
    detail::require_setting(detail::finite_at_least_zero(eps), who, "eps must be finite and >= 0", eps);
  }
};

// Adam with decoupled weight decay (PyTorch's AdamW): p <- p - lr wd p, then Adam. An
// aggregate of its own (not derived from adam) so that designated initializers work:
// tl::adamw{.lr = 3e-4, .weight_decay = 0.1}.
struct adamw {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  static constexpr const char* name = "adamw";
  static constexpr bool generic_update = true;
  static constexpr std::size_t state_slots = adam::state_slots;
  static constexpr const auto& slot_names = adam::slot_names;
  template <class T> using constants = adam::constants<T>;
  template <class T> TL_HD constants<T> at_step(long t) const {
    constants<T> c = adam{lr, beta1, beta2, eps}.template at_step<T>(t);
    c.keep = T(1.0 - lr * weight_decay);
    return c;
  }
  template <class T> TL_HD static void update(const constants<T>& c, T& p, T g, T& m, T& v) {
    adam::update(c, p, g, m, v);
  }
  void check() const {
    adam{lr, beta1, beta2, eps}.check(name);
    detail::require_setting(detail::finite_at_least_zero(weight_decay), name, "weight_decay must be finite and >= 0",
                            weight_decay);
  }
};

namespace detail {
template <class O>
concept optimizer_update_one_slot = O::state_slots == 1 && requires(const typename O::template constants<float>& c,
                                                                     float& p, float g, float& s) {
  O::update(c, p, g, s);
};
template <class O>
concept optimizer_update_two_slots = O::state_slots == 2 && requires(const typename O::template constants<float>& c,
                                                                      float& p, float g, float& s) {
  O::update(c, p, g, s, s);
};
}  // namespace detail

template <class O>
concept optimizer = std::is_class_v<O> && requires(const O& o) {
  typename O::template constants<float>;
  { O::state_slots } -> std::convertible_to<std::size_t>;
  { o.template at_step<float>(1L) } -> std::same_as<typename O::template constants<float>>;
} && (detail::optimizer_update_one_slot<O> || detail::optimizer_update_two_slots<O>);

namespace detail {
// Before every step: the optimizer's check(), where it has one.
template <class Optimizer>
void check_settings(const Optimizer& o) {
  if constexpr (requires { o.check(); }) o.check();
}

// Parameter i's step: state holds state_slots arrays of n values.
template <class Optimizer, class T>
TL_HD TL_INLINE void optimizer_update(const typename Optimizer::template constants<T>& c, T* params, T g, T* state,
                                      std::size_t i, std::size_t n) {
  if constexpr (Optimizer::state_slots == 1) Optimizer::update(c, params[i], g, state[i]);
  else Optimizer::update(c, params[i], g, state[i], state[n + i]);
}

// Whether the optimizer's update also takes lanes of values (core/lanes.hpp): only
// where it says so (generic_update = true, as the built-in ones do), since an update
// that branches on a value (if (g > 0)), calls std:: functions or asks
// numeric_limits<T> would not compile for lanes, or would mean something else there.
template <class Optimizer, class T, std::size_t K>
concept optimizer_takes_lanes = requires { requires Optimizer::generic_update; } &&
                                (requires(const Optimizer& o, lanes<T, K>& v) {
                                  Optimizer::update(o.template at_step<lanes<T, K>>(1L), v, v, v, v);
                                } || requires(const Optimizer& o, lanes<T, K>& v) {
                                  Optimizer::update(o.template at_step<lanes<T, K>>(1L), v, v, v);
                                });

inline constexpr std::size_t optimizer_lanes = 16;

// Step `step` of parameters [first, last) of n, on the host: 16 at a time on lanes
// (vector instructions; the same rule as one at a time, to an ulp or so where the
// compiler contracts a product and a sum into an FMA differently:
// tests/cpu/test_optimizers.cpp) where the optimizer takes them, the rest one by one.
template <class Optimizer, class T>
void optimizer_update_range(const Optimizer& opt, long step, T* params, const T* grad, T* state, std::size_t first,
                            std::size_t last, std::size_t n) {
  constexpr std::size_t K = optimizer_lanes;
  std::size_t i = first;
  if constexpr (optimizer_takes_lanes<Optimizer, T, K>) {
    using L = lanes<T, K>;
    const auto c = opt.template at_step<L>(step);
    for (; i + K <= last; i += K) {  // (memcpy: vector moves)
      L p, g, s[Optimizer::state_slots];  // s: the state's layout for one "parameter", p
      std::memcpy(p.v, params + i, sizeof p.v);
      std::memcpy(g.v, grad + i, sizeof g.v);
      for (std::size_t j = 0; j < Optimizer::state_slots; ++j) std::memcpy(s[j].v, state + j * n + i, sizeof s[j].v);
      optimizer_update<Optimizer>(c, &p, g, s, 0, 1);
      std::memcpy(params + i, p.v, sizeof p.v);
      for (std::size_t j = 0; j < Optimizer::state_slots; ++j) std::memcpy(state + j * n + i, s[j].v, sizeof s[j].v);
    }
  }
  const auto c = opt.template at_step<T>(step);
  for (; i < last; ++i) optimizer_update<Optimizer>(c, params, grad[i], state, i, n);
}

// One optimizer step over n parameters.
template <class Optimizer, class T>
void optimizer_step(const Optimizer& opt, long step, T* params, const T* grad, T* state, std::size_t n) {
  optimizer_update_range(opt, step, params, grad, state, 0, n, n);
}
}  // namespace detail

}  // namespace tl
