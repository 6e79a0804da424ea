// Fixed-size arrays of expressions: the N outputs and N targets of one sample in a
// sample loss (nn/expression_loss.hpp), the parameters and inputs of an expression
// model. Elements have different types (each is its own graph), so an index is a
// compile-time constant: `yhat[tl::idx<0>]`, or tl::sum_over<N>(f) with f taking one.
//   tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat)    // softmax cross-entropy
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/core/indexed_values.hpp"
#include "tapeless/expr/operators.hpp"

namespace tl {

template <std::size_t I>
inline constexpr std::integral_constant<std::size_t, I> idx{};

namespace detail {
template <class Combine, class Acc>
constexpr auto fold_left(Combine, const Acc& acc) { return acc; }
template <class Combine, class Acc, class Next, class... Rest>
constexpr auto fold_left(Combine combine, const Acc& acc, const Next& next, const Rest&... rest) {
  return fold_left(combine, combine(acc, next), rest...);
}
}  // namespace detail

template <class... Es>
struct expression_array {
  detail::indexed_values<std::index_sequence_for<Es...>, Es...> items;  // (not a std::tuple: core/indexed_values.hpp)

  static constexpr std::size_t size() { return sizeof...(Es); }
  template <std::size_t I>
  constexpr auto get() const {
    static_assert(I < sizeof...(Es), "tapeless: expression array index out of range (tl::idx<I> with I >= the size)");
    if constexpr (I < sizeof...(Es)) return detail::value_at<I>(items);
    else return literal<0>{};
  }
  template <std::size_t I>
  constexpr auto operator[](std::integral_constant<std::size_t, I>) const { return get<I>(); }
  // A run-time index cannot pick among elements of different types: say so.
  template <class Index>
    requires std::is_integral_v<Index>
  constexpr auto operator[](Index) const {
    static_assert(dependent_false<Index>,
                  "tapeless: index an expression array with a compile-time index, a[tl::idx<0>], not a[0]");
    return literal<0>{};
  }
  // f applied to every element (tl::exp(array) calls this).
  template <class F>
  constexpr auto map(const F& f) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return make(f(get<I>())...); }(
        std::index_sequence_for<Es...>{});
  }
  template <class... Rs>
  static constexpr expression_array<Rs...> make(const Rs&... r) { return {{r...}}; }
};

// tl::make_array(a, b, ...): an array of the given expressions (a model's outputs).
template <class... Es>
constexpr expression_array<Es...> make_array(const Es&... e) { return {{e...}}; }

template <class X> struct is_expression_array : std::false_type {};
template <class... Es> struct is_expression_array<expression_array<Es...>> : std::true_type {};
template <class X>
inline constexpr bool is_expression_array_v = is_expression_array<std::remove_cvref_t<X>>::value;

template <std::size_t I, class... Es>
constexpr auto get(const expression_array<Es...>& a) { return a.template get<I>(); }

// var<First>, ..., var<First + N - 1> as one array.
template <std::size_t First, std::size_t N>
constexpr auto variables() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return expression_array<variable<First + I>...>{};
  }(std::make_index_sequence<N>{});
}

// f(idx<0>), ..., f(idx<N-1>) as one array.
template <std::size_t N, class F>
constexpr auto generate(const F& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return expression_array<std::remove_cvref_t<decltype(f(idx<I>))>...>{{f(idx<I>)...}};
  }(std::make_index_sequence<N>{});
}

namespace detail {
// f(a, b) with a = var<0..A-1> and b = var<A..A+B-1> as arrays, seen as a function of
// A + B variables (for tracing): a sample loss's (yhat, y), a formula's (p, x).
template <std::size_t A, std::size_t B, class F>
struct array_pair_function {
  F f;
  template <class... V>
    requires std::is_invocable_v<const F&, decltype(variables<0, A>()), decltype(variables<A, B>())>
  constexpr auto operator()(const V&...) const {
    return f(variables<0, A>(), variables<A, B>());
  }
};

template <class A, std::size_t I>
constexpr auto element(const A& a) {
  if constexpr (is_expression_array_v<A>) return a.template get<I>();
  else return a;  // a scalar or expression broadcasts
}
template <class A, class B>
constexpr std::size_t common_size() {
  if constexpr (is_expression_array_v<A> && is_expression_array_v<B>) {
    static_assert(std::remove_cvref_t<A>::size() == std::remove_cvref_t<B>::size(),
                  "tapeless: elementwise operation on expression arrays of different sizes");
    return std::remove_cvref_t<A>::size();
  } else if constexpr (is_expression_array_v<A>) {
    return std::remove_cvref_t<A>::size();
  } else {
    return std::remove_cvref_t<B>::size();
  }
}
template <class A, class B, class F>
constexpr auto zip_with(const A& a, const B& b, const F& f) {
  return generate<common_size<A, B>()>([&](auto i) { return f(element<A, i>(a), element<B, i>(b)); });
}
template <class A, class B>
concept array_operands = (is_expression_array_v<A> || is_expression_array_v<B>) &&
                         (is_expression_array_v<A> || operand<A>) && (is_expression_array_v<B> || operand<B>);
}  // namespace detail

template <class A, class B> requires detail::array_operands<A, B>
constexpr auto operator+(const A& a, const B& b) { return detail::zip_with(a, b, [](auto x, auto y) { return x + y; }); }
template <class A, class B> requires detail::array_operands<A, B>
constexpr auto operator-(const A& a, const B& b) { return detail::zip_with(a, b, [](auto x, auto y) { return x - y; }); }
template <class A, class B> requires detail::array_operands<A, B>
constexpr auto operator*(const A& a, const B& b) { return detail::zip_with(a, b, [](auto x, auto y) { return x * y; }); }
template <class A, class B> requires detail::array_operands<A, B>
constexpr auto operator/(const A& a, const B& b) { return detail::zip_with(a, b, [](auto x, auto y) { return x / y; }); }
template <class A> requires is_expression_array_v<A>
constexpr auto operator-(const A& a) { return a.map(negate); }

// f(idx<0>) + ... + f(idx<N-1>), left to right.
template <std::size_t N, class F>
constexpr auto sum_over(const F& f) {
  static_assert(N > 0, "tapeless::sum_over: needs at least one term");
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::fold_left([](auto x, auto y) { return x + y; }, f(idx<I>)...);
  }(std::make_index_sequence<N>{});
}

template <class... Es>
constexpr auto sum(const expression_array<Es...>& a) {
  return sum_over<sizeof...(Es)>([&](auto i) { return a[i]; });
}
template <class... Es>
constexpr auto mean(const expression_array<Es...>& a) {  // 1/N as a literal: the mean stays shareable
  return sum(a) * literal<1.0 / double(sizeof...(Es))>{};
}
template <class A, class B> requires is_expression_array_v<A> && is_expression_array_v<B>
constexpr auto dot(const A& a, const B& b) { return sum(a * b); }

// Largest and smallest element (tl::max(a, b) folded left to right).
template <class... Es>
constexpr auto max(const expression_array<Es...>& a) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::fold_left([](auto x, auto y) { return tl::max(x, y); }, a.template get<I>()...);
  }(std::index_sequence_for<Es...>{});
}
template <class... Es>
constexpr auto min(const expression_array<Es...>& a) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::fold_left([](auto x, auto y) { return tl::min(x, y); }, a.template get<I>()...);
  }(std::index_sequence_for<Es...>{});
}

// log(sum(exp(a))), stable: the largest element is subtracted before exp. An infinite
// largest one is not (it is replaced by 0, as jax.nn.logsumexp does): all -inf gives
// -inf and a +inf gives +inf, where inf - inf would make both NaN.
template <class... Es>
constexpr auto logsumexp(const expression_array<Es...>& a) {
  const auto largest = max(a);
  // largest - largest is 0 exactly when it is finite (inf - inf and NaN are NaN). (Not
  // abs(largest) < lit<inf>: nvcc's host stub spells that literal `inf`, and fails.)
  const auto m = where(largest - largest < lit<1>, largest, lit<0>);
  return m + log(sum((a - m).map(exp)));
}
// log(softmax(a)) = a - logsumexp(a).
template <class... Es>
constexpr auto log_softmax(const expression_array<Es...>& a) { return a - logsumexp(a); }

}  // namespace tl
