// The scalar-function API: value_and_grad, grad, jacobian, hvp, hessian.
//
//   auto f = [](auto x, auto y) { return x * tl::sin(y); };
//   auto [v, g] = tl::value_and_grad(f, std::array{1.0, 2.0});
//
// `f` is either an expression or a callable taking N expressions (one per
// coordinate of the point); it is traced once, at compile time, by its type.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "tapeless/core/dual.hpp"
#include "tapeless/expr/reverse.hpp"
#include "tapeless/expr/trace.hpp"

namespace tl {

template <class T, std::size_t N>
struct value_and_gradient {
  T value;
  std::array<T, N> gradient;
};

namespace detail {
template <class T> struct is_point_scalar : std::bool_constant<is_scalar_v<T>> {};
template <class T> struct is_point_scalar<dual<T>> : std::bool_constant<is_scalar_v<T>> {};

template <class T>
constexpr bool check_point() {
  static_assert(is_point_scalar<T>::value,
                "tapeless: the point must hold float or double values (an integer point has no derivative)");
  return is_point_scalar<T>::value;
}

template <class Expr, std::size_t N>
constexpr void check_arity() {
  static_assert(graph::arity<Expr> <= N,
                "tapeless: the expression uses a variable index past the end of the point");
}

template <std::size_t N, class Expr, class T>
value_and_gradient<T, N> value_and_grad_of(const Expr& expr, const std::array<T, N>& point) {
  check_arity<Expr, N>();
  reverse_sweep<Expr, T, N> sweep;
  const T v = sweep.value_and_backward(expr, point.data());
  return {v, sweep.gradient()};
}
}  // namespace detail

template <class F, class T, std::size_t N>
value_and_gradient<T, N> value_and_grad(const F& f, const std::array<T, N>& point) {
  if constexpr (detail::check_point<T>() && detail::check_trace<N, F>()) {
    return detail::value_and_grad_of(detail::trace<N>(f), point);
  } else {
    return {};
  }
}

template <class F, class T, std::size_t N>
std::array<T, N> grad(const F& f, const std::array<T, N>& point) {
  return value_and_grad(f, point).gradient;
}

template <class F, class T, std::size_t N>
T evaluate(const F& f, const std::array<T, N>& point) {
  return value_and_grad(f, point).value;
}

// Hessian-vector product H(point) * v, forward over reverse: the reverse sweep runs
// on dual numbers whose tangent is v, so the gradient's tangent is H v.
template <class F, class T, std::size_t N>
std::array<T, N> hvp(const F& f, const std::array<T, N>& point, const std::array<T, N>& v) {
  std::array<dual<T>, N> seeded;
  for (std::size_t i = 0; i < N; ++i) seeded[i] = dual<T>(point[i], v[i]);
  const auto g = value_and_grad(f, seeded).gradient;
  std::array<T, N> hv;
  for (std::size_t i = 0; i < N; ++i) hv[i] = g[i].tangent;
  return hv;
}

// Dense Hessian: N Hessian-vector products with the unit vectors.
template <class F, class T, std::size_t N>
std::array<std::array<T, N>, N> hessian(const F& f, const std::array<T, N>& point) {
  std::array<std::array<T, N>, N> h;
  for (std::size_t j = 0; j < N; ++j) {
    std::array<T, N> unit{};
    unit[j] = T(1);
    h[j] = hvp(f, point, unit);  // column j; symmetric, so also row j
  }
  return h;
}

// Jacobian of a vector-valued function: f returns an expression array (tl::make_array),
// a std::tuple or a std::array of expressions; row i is the gradient of output i (one
// reverse sweep per output).
template <class F, class T, std::size_t N>
auto jacobian(const F& f, const std::array<T, N>& point) {
  constexpr bool ok = detail::check_point<T>() && detail::check_trace<N, F>();
  if constexpr (!ok) {
    return 0;
  } else {
    const auto rows = [&](const auto&... out) {
      return std::array<std::array<T, N>, sizeof...(out)>{detail::value_and_grad_of(out, point).gradient...};
    };
    const auto outputs = detail::trace<N>(f);
    if constexpr (is_expression_array_v<decltype(outputs)>)
      return [&]<std::size_t... I>(std::index_sequence<I...>) { return rows(outputs.template get<I>()...); }(
          std::make_index_sequence<outputs.size()>{});
    else
      return std::apply(rows, outputs);
  }
}

}  // namespace tl
