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

// In device code a sample loss of more than this many scheduled nodes is called, not
// inlined: each training kernel that computes the loss (up to three in one program)
// would otherwise carry its own copy through nvcc's optimizer, which took about 12 s a
// copy at 64 outputs (580 nodes; the whole build 74 s inlined, 39 s called). The call
// costs run time: a 2-64-32 cross-entropy fit, whose step is mostly the loss, ran
// 7-11 % slower with it (H100; docs/performance.md, 2026-12-06 late), so losses of up
// to 512 nodes (the README's cross-entropy up to 56 classes) stay inlined. The CPU's
// lane loops always inline.
inline constexpr std::size_t inlined_sample_loss_nodes = 512;

template <std::size_t N, class Expr>
struct expression_sample_loss {
  detail::child<Expr, 0> expr_;
  static constexpr double denominator(std::size_t, std::size_t batch) { return double(batch); }
  template <std::size_t Outputs, std::size_t K, class T>
  TL_HD TL_INLINE void group(const T* yhat, const T* y, T* dyhat, T* loss) const {
    static_assert(Outputs == N, "tapeless::sample_loss<N>: N must equal the model's number of outputs");
    if constexpr (TL_ON_DEVICE && graph::schedule_size<Expr> > inlined_sample_loss_nodes)
      group_called<K>(yhat, y, dyhat, loss);
    else
      group_inlined<K>(yhat, y, dyhat, loss);
  }

 private:
  template <std::size_t K, class T>
  TL_HD __attribute__((noinline)) void group_called(const T* yhat, const T* y, T* dyhat, T* loss) const {
    group_inlined<K>(yhat, y, dyhat, loss);
  }
  template <std::size_t K, class T>
  TL_HD TL_INLINE void group_inlined(const T* yhat, const T* y, T* dyhat, T* loss) const {
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
