// Activations. A built-in function object (tl::gelu, tl::tanh, ...) carries a
// hand-written value_and_derivative; any other callable is traced once, on the host,
// with var<0>, and the expression it builds is differentiated by the expression core:
//   tl::dense<1, 16>([](auto x) { return x * tl::sigmoid(1.702 * x); })
// Only the traced expression (a plain aggregate of its run-time constants) is kept,
// never the lambda, so the same activation runs in the CPU's vectorized lane loops
// and inside CUDA kernels.
#pragma once

#include <concepts>
#include <type_traits>

#include "tapeless/core/type_value.hpp"
#include "tapeless/expr/forward.hpp"
#include "tapeless/expr/trace.hpp"

namespace tl {

// The traced expression is kept only when it holds run-time constants; an empty one
// is rebuilt where it is used (nvcc refuses kernel parameters made of empty members).
// The expression's type comes as a value, std::type_identity<Expr>{}, not as a type
// argument (core/type_value.hpp: g++ looks a model's layers up by argument, and a
// 28-level `y = sin(y) * cos(y) * lit<0.9>` activation took 100 s to build as a type).
template <auto ExprType>
struct expression_activation {
  using Expr = detail::type_named_by<ExprType>;
  static constexpr const char* name = "expression";
  detail::child<Expr, 0> expr_;

  // Forward mode: one variable, so (value, derivative) pairs through the expression
  // are the cheapest, and they vectorize across the CPU's lanes.
  template <class T>
  TL_HD TL_INLINE T value_and_derivative(T x, T& d) const {
    const T point[1] = {x};
    const auto r = detail::tangent_sweep<Expr, T, 0>::run(expr_.get(), point);
    d = r.tangent;
    return r.value;
  }
};

template <class F>
concept builtin_activation = requires(const F& f, float x, float& d) {
  { f.value_and_derivative(x, d) } -> std::same_as<float>;
};

// An activation whose derivative is a function of its value (tl::tanh, tl::sigmoid,
// tl::relu, tl::identity): a backend may keep such a layer's outputs alone and
// recompute the derivative from them. The protocol, for a user's own activation too:
// `static constexpr bool value_derivable = true` and a static derivative_from_value(y)
// for float and double that gives f'(x) from y = f(x) (not f'(y)), as
// value_and_derivative does.
template <class F>
concept value_derivable_activation =
    builtin_activation<F> && requires { requires F::value_derivable; } && requires(float y, double w) {
      { F::derivative_from_value(y) } -> std::same_as<float>;
      { F::derivative_from_value(w) } -> std::same_as<double>;
    };

namespace detail {
template <class F>
constexpr bool check_activation() {
  if constexpr (builtin_activation<F>) return true;
  else return check_trace<1, F>();
}

// The activation object a layer stores: a built-in as is, a callable traced.
template <class F>
constexpr auto make_activation(const F& f) {
  if constexpr (builtin_activation<F>) {
    return f;
  } else if constexpr (check_trace<1, F>()) {
    const auto expr = trace<1>(f);
    return expression_activation<std::type_identity<std::remove_cvref_t<decltype(expr)>>{}>{{expr}};
  } else {
    return identity_fn{};  // check_trace has reported the error
  }
}
}  // namespace detail

}  // namespace tl
