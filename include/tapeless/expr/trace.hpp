// Tracing: a generic lambda of N arguments is called once with var<0>..var<N-1>, and
// the type it returns is the expression to differentiate. Misuse is caught here,
// before anything else is instantiated, so the compiler reports one readable line:
// a lambda that takes numbers (int, double) instead of `auto`, one that returns a
// plain number or a condition, and one so entangled with run-time constants that it
// would be copied thousands of times (graph::record_count).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/expr/array.hpp"
#include "tapeless/expr/graph.hpp"
#include "tapeless/expr/operators.hpp"

namespace tl::detail {

template <std::size_t N, class F, class = std::make_index_sequence<N>>
struct invocable_with_variables : std::false_type {};
template <std::size_t N, class F, std::size_t... I>
struct invocable_with_variables<N, F, std::index_sequence<I...>> : std::is_invocable<const F&, variable<I>...> {
  template <class G = F>  // named only once invocability is known
  using result = std::invoke_result_t<const G&, variable<I>...>;
};

template <class X> struct is_condition : std::false_type {};
template <class C, class A, class B> struct is_condition<condition<C, A, B>> : std::true_type {};

// True when E is an expression tapeless can differentiate; else one static_assert.
template <class E>
constexpr bool check_expression() {
  using R = std::remove_cvref_t<E>;
  if constexpr (std::is_same_v<R, refused_expression>) {
    return false;  // building it was refused, with its own message
  } else if constexpr (std::is_arithmetic_v<R>) {
    static_assert(dependent_false<R>,
                  "tapeless: the function returns a plain number, not an expression of its arguments; build the "
                  "result from the arguments with + - * / and tl:: functions");
    return false;
  } else if constexpr (is_condition<R>::value) {
    static_assert(dependent_false<R>,
                  "tapeless: the function returns a comparison, which has no derivative; use tl::where(a > b, p, q)");
    return false;
  } else if constexpr (!is_expression_v<R>) {
    static_assert(dependent_false<R>,
                  "tapeless: the function must return a tapeless expression of its arguments (std:: math functions "
                  "and casts to numbers are not differentiable: use tl::exp, tl::sin, ...)");
    return false;
  } else if constexpr (graph::record_count<R> > graph::record_limit) {
    static_assert(dependent_false<R>,
                  "tapeless: a subexpression holding a run-time constant is reused so often that it would be "
                  "copied thousands of times; write the constant as tl::lit<c> (compile-time) so it is shared");
    return false;
  } else {
    return true;
  }
}

// True when f can be traced with N variables and returns differentiable expressions
// (one, or a std::tuple / std::array of them); else one static_assert.
template <std::size_t N, class F>
constexpr bool check_trace() {
  if constexpr (is_expression_v<F>) {
    return check_expression<F>();
  } else if constexpr (!invocable_with_variables<N, F>::value) {
    static_assert(dependent_false<F>,
                  "tapeless: the function cannot be called with tapeless expressions: take every argument as "
                  "`auto` (not int, float or double), build the result with tl:: functions (tl::exp, not "
                  "std::exp; tl::pow(x, y); p[tl::idx<0>], not p[0]) and choose with tl::where(a > b, p, q), "
                  "not `if` or `?:`; and it must take as many arguments as the point has values");
    return false;
  } else {
    using R = std::remove_cvref_t<typename invocable_with_variables<N, F>::template result<>>;
    if constexpr (is_expression_array_v<R>) {
      return []<std::size_t... I>(std::index_sequence<I...>) {
        return (check_expression<decltype(std::declval<const R&>().template get<I>())>() && ...);
      }(std::make_index_sequence<R::size()>{});
    } else if constexpr (requires { std::tuple_size<R>::value; } && !is_expression_v<R>) {
      return []<std::size_t... I>(std::index_sequence<I...>) {
        return (check_expression<std::tuple_element_t<I, R>>() && ...);
      }(std::make_index_sequence<std::tuple_size_v<R>>{});
    } else {
      return check_expression<R>();
    }
  }
}

// An expression (or an array of them) that holds no run-time constant: its type is
// all there is to it.
template <class R>
inline constexpr bool is_type_only_v = is_shareable_v<R>;
template <class... Es>
inline constexpr bool is_type_only_v<expression_array<Es...>> = (is_shareable_v<Es> && ...);

// The expression f builds from var<0>..var<N-1> (f itself when it is one). When f
// holds nothing and its result holds no run-time constant, the result is made from
// its type and f is not called: the functions that build it are then only
// instantiated, never compiled (for a sample loss over 64 outputs, hundreds of
// functions whose names spell out the graph).
template <std::size_t N, class F>
constexpr auto trace(const F& f) {
  if constexpr (is_expression_v<F>) {
    return f;
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      using R = std::remove_cvref_t<std::invoke_result_t<const F&, variable<I>...>>;
      if constexpr (std::is_empty_v<F> && is_type_only_v<R>) return R{};
      else return f(variable<I>{}...);
    }(std::make_index_sequence<N>{});
  }
}

template <class T>
inline constexpr bool is_scalar_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

}  // namespace tl::detail
