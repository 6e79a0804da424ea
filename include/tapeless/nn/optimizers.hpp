// Optimizers, each exactly its published update rule (PyTorch's torch.optim forms,
// which Optimisers.jl matches). An optimizer is plain data; its per-parameter state
// lives in `state_slots` arrays beside the parameters, and `update` is one
// element's step, so the CPU loop and the CUDA kernels share it.
#pragma once

#include <cmath>
#include <cstddef>

#include "tapeless/core/math.hpp"

namespace tl {

// v <- momentum v + g;  p <- p - lr v   (v starts at 0, so the first step is lr g)
struct sgd {
  float lr = 0.01f;
  float momentum = 0.0f;
  static constexpr std::size_t state_slots = 1;
  struct constants { float lr, momentum; };
  TL_HD constants at_step(long) const { return {lr, momentum}; }
  TL_HD static void update(const constants& c, float& p, float g, float& v) {
    v = c.momentum * v + g;
    p -= c.lr * v;
  }
};

// m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
// p <- p - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
struct adam {
  float lr = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  static constexpr std::size_t state_slots = 2;
  struct constants { float lr, beta1, beta2, eps, bias1, bias2, decay; };
  TL_HD constants at_step(long t) const {  // t counts from 1
    return {lr, beta1, beta2, eps, static_cast<float>(1.0 - ::pow(double(beta1), double(t))),
            static_cast<float>(1.0 - ::pow(double(beta2), double(t))), 0.0f};
  }
  TL_HD static void update(const constants& c, float& p, float g, float& m, float& v) {
    p -= c.lr * c.decay * p;  // AdamW's decoupled decay; 0 for Adam
    m = c.beta1 * m + (1.0f - c.beta1) * g;
    v = c.beta2 * v + (1.0f - c.beta2) * g * g;
    p -= c.lr * (m / c.bias1) / (math::sqrt(v / c.bias2) + c.eps);
  }
};

// Adam with decoupled weight decay (PyTorch's AdamW): p <- p - lr wd p, then Adam.
struct adamw : adam {
  float weight_decay = 0.01f;
  TL_HD constexpr adamw(float lr_ = 0.001f, float beta1_ = 0.9f, float beta2_ = 0.999f, float eps_ = 1e-8f,
                  float weight_decay_ = 0.01f)
      : adam{lr_, beta1_, beta2_, eps_}, weight_decay(weight_decay_) {}
  TL_HD constants at_step(long t) const {
    constants c = adam::at_step(t);
    c.decay = weight_decay;
    return c;
  }
};

namespace detail {
// Parameter i's step: state holds state_slots arrays of n floats.
template <class Optimizer>
TL_HD TL_INLINE void optimizer_update(const Optimizer&, const typename Optimizer::constants& c, float* params,
                                      float g, float* state, std::size_t i, std::size_t n) {
  if constexpr (Optimizer::state_slots == 1) Optimizer::update(c, params[i], g, state[i]);
  else Optimizer::update(c, params[i], g, state[i], state[n + i]);
}

// One optimizer step over n parameters.
template <class Optimizer>
void optimizer_step(const Optimizer& opt, long step, float* params, const float* grad, float* state, std::size_t n) {
  const auto c = opt.at_step(step);
  for (std::size_t i = 0; i < n; ++i) optimizer_update(opt, c, params, grad[i], state, i, n);
}
}  // namespace detail

}  // namespace tl
