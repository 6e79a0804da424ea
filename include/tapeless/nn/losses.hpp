// Losses. group<N, K>(yhat, y, dyhat, loss) takes K samples of N outputs, lane-major
// ([N][K], as in nn/sample_pass.hpp), writes each sample's summed loss and the
// gradient with respect to yhat. The batch loss divides by `denominator`: every
// element for the elementwise losses (Lux's and PyTorch's mean), the number of
// samples for softmax cross-entropy.
#pragma once

#include <concepts>
#include <cstddef>
#include <limits>
#include <stdexcept>

#include "tapeless/core/math.hpp"

namespace tl {

// An elementwise loss defines element(yhat, y, d) -> loss, d = d loss / d yhat.
template <class Derived>
struct elementwise_loss_base {
  static constexpr double denominator(std::size_t outputs, std::size_t batch) { return double(outputs) * double(batch); }
  // K samples, lane-major [N][K]: per-lane loss sums into loss[K], gradient into dyhat.
  template <std::size_t N, std::size_t K, class T>
  TL_HD void group(const T* yhat, const T* y, T* dyhat, T* loss) const {
    for (std::size_t k = 0; k < K; ++k) loss[k] = T(0);
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t k = 0; k < K; ++k)
        loss[k] += static_cast<const Derived&>(*this).element(yhat[n * K + k], y[n * K + k], dyhat[n * K + k]);
  }
};

struct mse_loss : elementwise_loss_base<mse_loss> {
  template <class T> TL_HD T element(T yhat, T y, T& d) const {
    const T r = yhat - y;
    d = T(2) * r;
    return r * r;
  }
};

struct mae_loss : elementwise_loss_base<mae_loss> {
  template <class T> TL_HD T element(T yhat, T y, T& d) const {
    const T r = yhat - y;
    d = math::select(r > T(0), T(1), math::select(r < T(0), T(-1), T(0)));
    return math::abs(r);
  }
};

// 0.5 r^2 for |r| <= delta, delta (|r| - delta / 2) beyond (PyTorch's HuberLoss).
// delta must be positive (0 made every loss and gradient 0, a negative one a negative
// loss): std::invalid_argument otherwise, as PyTorch refuses it.
struct huber_loss : elementwise_loss_base<huber_loss> {
  double delta = 1.0;
  constexpr explicit huber_loss(double d = 1.0) : delta(d) {
    if (!(d > 0 && d <= std::numeric_limits<double>::max()))
      throw std::invalid_argument("tapeless::huber_loss: delta must be positive and finite");
  }
  template <class T> TL_HD T element(T yhat, T y, T& d) const {
    const T r = yhat - y, a = math::abs(r), dl = T(delta);
    d = math::select(a <= dl, r, math::select(r > T(0), dl, -dl));
    return math::select(a <= dl, T(0.5) * r * r, dl * (a - T(0.5) * dl));
  }
};

// yhat are logits, y targets in [0, 1]: max(z, 0) - z y + log(1 + e^{-|z|}).
struct binary_cross_entropy_with_logits_loss : elementwise_loss_base<binary_cross_entropy_with_logits_loss> {
  template <class T> TL_HD T element(T z, T y, T& d) const {
    const T t = math::exp(-math::abs(z));
    d = math::select(z >= T(0), T(1) / (T(1) + t), t / (T(1) + t)) - y;
    return math::select(z > T(0), z, T(0)) - z * y + math::log1p(t);
  }
};

// yhat are logits over N classes, y a probability vector (one-hot or soft labels):
// sum_k y_k (logsumexp(yhat) - yhat_k); mean over samples.
struct softmax_cross_entropy_loss {
  static constexpr double denominator(std::size_t, std::size_t batch) { return double(batch); }
  template <std::size_t N, std::size_t K, class T>
  TL_HD void group(const T* yhat, const T* y, T* dyhat, T* loss) const {
    for (std::size_t k = 0; k < K; ++k) {
      T largest = yhat[k];
      for (std::size_t n = 1; n < N; ++n) largest = math::select(yhat[n * K + k] > largest, yhat[n * K + k], largest);
      // sum_y log(sum exp(yhat - largest)) - sum y (yhat - largest): the logits are
      // shifted before the products, so large ones do not cancel (as sum_y (largest +
      // log sum_exp) - y . yhat did: a loss of 2.58 read 2.5 at logits of 3e6 in float).
      T sum_exp(0), sum_y(0), dot(0);
      for (std::size_t n = 0; n < N; ++n) {
        const T shifted = yhat[n * K + k] - largest;
        dyhat[n * K + k] = math::exp(shifted);
        sum_exp += dyhat[n * K + k];
        sum_y += y[n * K + k];
        dot += y[n * K + k] * shifted;
      }
      for (std::size_t n = 0; n < N; ++n) dyhat[n * K + k] = dyhat[n * K + k] / sum_exp * sum_y - y[n * K + k];
      loss[k] = sum_y * math::log(sum_exp) - dot;
    }
  }
};

// The protocol the training loops use: denominator(outputs, batch) and
// group<N, K>(yhat, y, dyhat, loss) as above (the loss need not be an elementwise one).
template <class L>
concept loss_function = requires(const L& l, const float* c, float* m) {
  { L::denominator(std::size_t(1), std::size_t(1)) } -> std::convertible_to<double>;
  l.template group<1, 1>(c, c, m, m);
};

template <class L>
constexpr bool check_loss() {
  static_assert(loss_function<L>,
                "tapeless: this is not a loss: a loss declares denominator(outputs, batch) and group<N, K>(yhat, y, "
                "dyhat, loss) (tapeless/nn/losses.hpp); write one with tl::elementwise_loss or tl::sample_loss");
  return loss_function<L>;
}

namespace detail {
// One sample's loss from its N outputs and N targets (contiguous, as a batch stores a
// sample's features), without keeping its derivative: tl::evaluate_loss on both
// backends. dyhat: N values of scratch (on the host from the heap: a model of a million
// outputs would overflow a stack array).
template <std::size_t N, class Loss, class T>
TL_HD T loss_of_sample(const Loss& loss, const T* yhat, const T* y, T* dyhat) {
  T value;
  loss.template group<N, 1>(yhat, y, dyhat, &value);
  return value;
}
}  // namespace detail

inline constexpr mse_loss mse{};
inline constexpr mae_loss mae{};
inline constexpr huber_loss huber{};
inline constexpr binary_cross_entropy_with_logits_loss binary_cross_entropy_with_logits{};
inline constexpr softmax_cross_entropy_loss softmax_cross_entropy{};

}  // namespace tl
