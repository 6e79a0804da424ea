// Losses written as lambdas; their derivatives come from the expression core.
//   tl::elementwise_loss([](auto yhat, auto y) { return tl::log(tl::cosh(yhat - y)); })
//       mean over every output of every sample, like tl::mse;
//   tl::sample_loss<N>([](const auto& yhat, const auto& y) { ... })
//       yhat and y are expression arrays (expr/array.hpp) of one sample's N outputs and
//       targets; mean over samples, like tl::softmax_cross_entropy.
// Each is traced once on the host; the loops evaluate the traced expression per lane.
#pragma once

#include <cstddef>

#include "tapeless/expr/array.hpp"
#include "tapeless/expr/forward.hpp"
#include "tapeless/expr/reverse.hpp"
#include "tapeless/expr/trace.hpp"
#include "tapeless/nn/losses.hpp"

namespace tl {

// The traced expression is kept only when it holds run-time constants; an empty one
// is rebuilt where it is used (nvcc refuses kernel parameters made of empty members).
template <class Expr>
struct expression_elementwise_loss : elementwise_loss_base<expression_elementwise_loss<Expr>> {
  detail::child<Expr, 0> expr_;
  constexpr explicit expression_elementwise_loss(const Expr& e) : expr_(e) {}
  template <class T>
  TL_HD TL_INLINE T element(T yhat, T y, T& d) const {  // forward mode: d/d yhat only
    const T point[2] = {yhat, y};
    const auto r = detail::tangent_sweep<Expr, T, 0>::run(expr_.get(), point);
    d = r.tangent;
    return r.value;
  }
};

template <std::size_t N, class Expr>
struct expression_sample_loss {
  detail::child<Expr, 0> expr_;
  static constexpr double denominator(std::size_t, std::size_t batch) { return double(batch); }
  template <std::size_t Outputs, std::size_t K, class T>
  TL_HD TL_INLINE void group(const T* yhat, const T* y, T* dyhat, T* loss) const {
    static_assert(Outputs == N, "tapeless::sample_loss<N>: N must equal the model's number of outputs");
    for (std::size_t k = 0; k < K; ++k) {
      T point[2 * N];
      for (std::size_t n = 0; n < N; ++n) {
        point[n] = yhat[n * K + k];
        point[N + n] = y[n * K + k];
      }
      detail::reverse_sweep<Expr, T, 2 * N> sweep;
      loss[k] = sweep.value_and_backward(expr_.get(), point);
      sweep.template each_variable_adjoint<N>([&](std::size_t i, const T& d) { dyhat[i * K + k] = d; });
    }
  }
};

template <class F>
constexpr auto elementwise_loss(const F& f) {
  if constexpr (detail::check_trace<2, F>()) {
    const auto expr = detail::trace<2>(f);
    return expression_elementwise_loss<std::remove_cvref_t<decltype(expr)>>(expr);
  } else {
    return mse_loss{};  // check_trace has reported the error
  }
}

template <std::size_t N, class F>
constexpr auto sample_loss(const F& f) {
  static_assert(N > 0, "tapeless::sample_loss<N>: N (the model's outputs) must be positive");
  using tracer = detail::array_pair_function<N, N, F>;  // f(yhat, y)
  if constexpr (detail::check_trace<2 * N, tracer>()) {
    const auto expr = detail::trace<2 * N>(tracer{f});
    return expression_sample_loss<N, std::remove_cvref_t<decltype(expr)>>{{expr}};
  } else {
    return softmax_cross_entropy_loss{};
  }
}

}  // namespace tl
