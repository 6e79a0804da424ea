// tl::skip(layers...): x + chain(layers...)(x), Lux's SkipConnection with + (a
// residual block). The inner chain must map its width to itself.
#pragma once

#include <cstddef>

#include "tapeless/nn/chain.hpp"

namespace tl {

template <std::size_t Inputs, std::size_t Outputs>
struct skip_width_check {
  static_assert(Inputs == Outputs,
                "tapeless::skip: the layers inside must end at the width they start from (x + f(x)); "
                "the widths are in skip_width_check<inputs, outputs> above");
  static constexpr bool ok = Inputs == Outputs;
};

template <class Inner>
struct skip_layer {
  static constexpr const char* kind = "skip";
  static_assert(skip_width_check<Inner::inputs, Inner::outputs>::ok || true);
  static constexpr std::size_t inputs = Inner::inputs, outputs = Inner::inputs;
  static constexpr std::size_t parameter_count = Inner::parameter_count;
  // The inner chain's saved values, then its output f(x).
  static constexpr std::size_t saved_count = Inner::saved_count + Inner::outputs;
  static constexpr std::size_t sublayer_count = Inner::sublayer_count;
  Inner inner;

  template <std::size_t I>
  TL_HD constexpr const auto& sublayer() const { return inner.template sublayer<I>(); }
  template <std::size_t I>
  static constexpr std::size_t parameter_offset = Inner::template parameter_offset<I>;
  template <std::size_t I>
  using layer_type = typename Inner::template layer_type<I>;

  template <class T>
  void init(T* p, rng& g) const { inner.init(p, g); }

  template <std::size_t K, class T>
  TL_HD TL_INLINE void forward(const T* p, const T* in, T* out, T* saved) const {
    T* f = saved + Inner::saved_count * K;
    inner.template forward<K>(p, in, f, saved);
    for (std::size_t j = 0; j < inputs * K; ++j) out[j] = in[j] + f[j];
  }

  template <bool InputDelta, std::size_t K, class T>
  TL_HD TL_INLINE void backward(const T* p, const T* in, const T*, T* saved, const T* dout, T* din, T* grad) const {
    const T* f = saved + Inner::saved_count * K;
    inner.template backward<InputDelta, K>(p, in, f, saved, dout, din, grad);
    if constexpr (InputDelta) {
      for (std::size_t j = 0; j < inputs * K; ++j) din[j] += dout[j];  // the identity path
    }
  }
};

template <class... Layers>
constexpr auto skip(const Layers&... layers) {
  return skip_layer<chain<Layers...>>{chain<Layers...>(layers...)};
}

}  // namespace tl
