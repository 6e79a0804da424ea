// A model that is a formula: tl::expression_model<P, I, O>(f), where
//   f(p, x)  (p: an expression array of P parameters, x: one of I inputs)
// returns the O outputs of one sample: an expression (O = 1) or an expression array.
//   auto decay = tl::expression_model<3, 1, 1>([](const auto& p, const auto& x) {
//     return p[tl::idx<0>] * tl::exp(-p[tl::idx<1>] * x[tl::idx<0>]) + p[tl::idx<2>];
//   }, {1.0, 0.5, 0.0});                                   // start values (default: 1)
// It is a layer (nn/layer.hpp): it trains with every optimizer, runs on the CPU and the
// GPU, composes with dense layers in a chain, and is what tl::least_squares fits. Its
// forward pass keeps each output's derivatives with respect to all P + I variables
// (the sample's Jacobian row, from one reverse sweep per output); backward contracts
// them with dout. f is traced once, on the host; only the expressions are kept.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/core/indexed_values.hpp"
#include "tapeless/core/lanes.hpp"
#include "tapeless/core/type_value.hpp"
#include "tapeless/expr/array.hpp"
#include "tapeless/expr/reverse.hpp"
#include "tapeless/expr/trace.hpp"
#include "tapeless/nn/layer.hpp"

namespace tl {

namespace detail {
// The outputs' expressions, each in a slot of its own (a plain aggregate for device
// code; empty expressions are rebuilt, not stored: detail::child).
template <class... Es>
using output_pack = indexed_values<std::index_sequence_for<Es...>, child<Es, 0>...>;
template <std::size_t O, class Pack>
using output_type = std::remove_cvref_t<decltype(value_at<O>(std::declval<const Pack&>()).get())>;

template <class R>
constexpr auto as_outputs(const R& r) {
  if constexpr (is_expression_array_v<R>) return r;
  else return expression_array<R>{{r}};
}
}  // namespace detail

// The outputs' expressions come as a value, std::type_identity<output_pack<...>>{},
// not as type arguments (core/type_value.hpp; a 24-level shared formula took 20 s to
// build as a type argument).
template <std::size_t P, std::size_t In, auto Formulas>
struct expression_model_layer {
  using formulas_type = detail::type_named_by<Formulas>;
  static_assert(P > 0 && In > 0, "tapeless::expression_model: needs at least one parameter and one input");
  static constexpr const char* kind = "expression";
  static constexpr std::size_t inputs = In, outputs = formulas_type::size, parameter_count = P;
  static constexpr std::size_t variables = P + In;
  static constexpr std::size_t saved_count = outputs * variables;  // d output / d (p, x), per sample
  formulas_type formulas;
  std::array<double, P> start;

  static constexpr std::array<parameter_block, 1> parameter_blocks() { return {{{"params", 0, P, 0}}}; }

  template <class T>
  void init(T* p, rng&) const {
    for (std::size_t j = 0; j < P; ++j) p[j] = static_cast<T>(start[j]);
  }

  // Output O's value and its derivatives d[v] for one sample at `point` (P + In values).
  template <std::size_t O, class T>
  TL_HD TL_INLINE T evaluate(const T* point, T* d) const {
    reverse_sweep_of<detail::output_type<O, formulas_type>, T> sweep;
    const T value = sweep.value_and_backward(detail::value_at<O>(formulas).get(), point);
    sweep.each_variable_adjoint([&](std::size_t v, const T& dv) { d[v] = dv; });
    return value;
  }

  // K samples: one sweep on lanes<T, K> (core/lanes.hpp), whose every operation is a loop
  // over the lanes, so the CPU's 16-sample groups run the formula in vector registers.
  template <std::size_t K, class T>
  TL_HD TL_INLINE void forward(const T* p, const T* in, T* out, T* saved) const {
    if constexpr (K == 1) {
      T point[variables];
      for (std::size_t j = 0; j < P; ++j) point[j] = p[j];
      for (std::size_t i = 0; i < In; ++i) point[P + i] = in[i];
      [&]<std::size_t... O>(std::index_sequence<O...>) {
        ((out[O] = each_derivative<O, 1>(point, saved, 0)), ...);
      }(std::make_index_sequence<outputs>{});
    } else {
      using L = lanes<T, K>;
      L point[variables];
      for (std::size_t j = 0; j < P; ++j) point[j] = L(p[j]);
      for (std::size_t i = 0; i < In; ++i)
        for (std::size_t k = 0; k < K; ++k) point[P + i].v[k] = in[i * K + k];
      [&]<std::size_t... O>(std::index_sequence<O...>) {
        (each_output_lanes<O, K>(point, out, saved), ...);
      }(std::make_index_sequence<outputs>{});
    }
  }

  template <bool InputDelta, std::size_t K, class T>
  TL_HD TL_INLINE void backward(const T*, const T*, const T*, T* saved, const T* dout, T* din, T* grad) const {
    for (std::size_t o = 0; o < outputs; ++o)
      for (std::size_t j = 0; j < P; ++j)
        for (std::size_t k = 0; k < K; ++k) grad[j * K + k] += dout[o * K + k] * saved[(o * variables + j) * K + k];
    if constexpr (InputDelta) {
      for (std::size_t i = 0; i < In; ++i)
        for (std::size_t k = 0; k < K; ++k) {
          T d = T(0);
          for (std::size_t o = 0; o < outputs; ++o) d += dout[o * K + k] * saved[(o * variables + P + i) * K + k];
          din[i * K + k] = d;
        }
    }
  }

 private:
  template <class E, class T>
  using reverse_sweep_of = detail::reverse_sweep<E, T, variables>;

  template <std::size_t O, std::size_t K, class T>
  TL_HD TL_INLINE void each_output_lanes(const lanes<T, K>* point, T* out, T* saved) const {
    reverse_sweep_of<detail::output_type<O, formulas_type>, lanes<T, K>> sweep;
    const lanes<T, K> value = sweep.value_and_backward(detail::value_at<O>(formulas).get(), point);
    for (std::size_t k = 0; k < K; ++k) out[O * K + k] = value.v[k];
    sweep.each_variable_adjoint(
        [&](std::size_t v, const lanes<T, K>& dv) { store_lanes<K>(dv, saved + (O * variables + v) * K); });
  }
  template <std::size_t K, class T>
  TL_HD TL_INLINE static void store_lanes(const lanes<T, K>& d, T* to) {
    for (std::size_t k = 0; k < K; ++k) to[k] = d.v[k];
  }

  template <std::size_t O, std::size_t K, class T>
  TL_HD TL_INLINE T each_derivative(const T* point, T* saved, std::size_t k) const {
    T d[variables];
    const T value = evaluate<O>(point, d);
    for (std::size_t v = 0; v < variables; ++v) saved[(O * variables + v) * K + k] = d[v];
    return value;
  }
};

namespace detail {
template <std::size_t P, std::size_t In, class... Es>
constexpr auto make_expression_model(const expression_array<Es...>& outputs, const std::array<double, P>& start) {
  return [&]<std::size_t... O>(std::index_sequence<O...>) {
    using pack = output_pack<Es...>;
    return expression_model_layer<P, In, std::type_identity<pack>{}>{
        pack{{child<Es, 0>(outputs.template get<O>())}...}, start};
  }(std::index_sequence_for<Es...>{});
}
template <std::size_t P>
constexpr std::array<double, P> ones() {
  std::array<double, P> a{};
  for (double& v : a) v = 1.0;
  return a;
}
}  // namespace detail

// O is the number of outputs f returns (checked).
template <std::size_t P, std::size_t In, std::size_t O = 1, class F>
constexpr auto expression_model(const F& f, const std::array<double, P>& start = detail::ones<P>()) {
  using tracer = detail::array_pair_function<P, In, F>;  // f(p, x)
  static_assert(P > 0 && In > 0 && O > 0, "tapeless::expression_model<P, I, O>: every count must be positive");
  if constexpr (detail::check_trace<P + In, tracer>()) {
    const auto outputs = detail::as_outputs(detail::trace<P + In>(tracer{f}));
    static_assert(std::remove_cvref_t<decltype(outputs)>::size() == O,
                  "tapeless::expression_model<P, I, O>: f returns another number of outputs than O");
    return detail::make_expression_model<P, In>(outputs, start);
  } else {
    // check_trace has reported the error; a layer of the declared shape (each output is
    // the first input) keeps the code that uses it from adding errors of its own.
    return [&]<std::size_t... Out>(std::index_sequence<Out...>) {
      return detail::make_expression_model<P, In>(expression_array<decltype((void(Out), variable<P>{}))...>{}, start);
    }(std::make_index_sequence<O>{});
  }
}

}  // namespace tl
