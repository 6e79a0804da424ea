// A model's forward and backward pass for a group of K samples, lane-major
// ([unit][K]), on per-group buffers: what the CPU batch loop (K = 16) and a CUDA
// thread (K = 1) run. Everything layer-specific happens behind the layer protocol.
#pragma once

#include <cstddef>

#include "tapeless/core/scratch.hpp"
#include "tapeless/nn/layer.hpp"

namespace tl::detail {

// (On the stack unless a wide model's group needs more: core/scratch.hpp.)
template <class Model, std::size_t K, class T>
struct group_buffers {
  group_array<T, (Model::saved_count ? Model::saved_count : 1) * K, K> saved;
  group_array<T, Model::outputs * K, K> out;
};

// x is [inputs][K]; returns the outputs, [outputs][K].
template <class Model, std::size_t K, class T>
TL_HD TL_INLINE const T* forward_group(const Model& model, const T* params, const T* x, group_buffers<Model, K, T>& b) {
  model.template forward<K>(params, x, b.out.data(), b.saved.data());
  return b.out.data();
}

// From dout = d loss / d outputs ([outputs][K]): adds each lane's d loss / d params
// into grad[p * K + lane]; the caller sums the lanes.
template <class Model, std::size_t K, class T>
TL_HD TL_INLINE void backward_group(const Model& model, const T* params, const T* x, group_buffers<Model, K, T>& b,
                                    const T* dout, T* grad) {
  model.template backward<false, K>(params, x, b.out.data(), b.saved.data(), dout, static_cast<T*>(nullptr), grad);
}

}  // namespace tl::detail
