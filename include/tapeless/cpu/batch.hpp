// The CPU backend: the whole batch in one fused pass. For each group of 16 samples,
// forward, loss, backward and gradient accumulation happen back to back on a few
// kilobytes of stack scratch (no per-layer batch matrices), vectorized across the
// group's samples. Gradients are summed in float per lane over chunks of 256 samples
// and the chunks in double, so large batches stay accurate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tapeless/nn/matrix.hpp"
#include "tapeless/nn/parameters.hpp"
#include "tapeless/nn/sample_pass.hpp"

namespace tl {

template <model Model>
struct loss_and_gradient {
  float loss;
  parameters<Model> gradient;
};

namespace detail {

template <model Model>
void check_batch(const char* where, const matrix& x, const matrix* y) {
  require_size(where, "the input rows (features of X) the model reads", Model::inputs, x.features());
  if (y) {
    require_size(where, "the target rows (features of y) the model writes", Model::outputs, y->features());
    require_size(where, "the number of target samples (the batch of X)", x.batch(), y->batch());
  }
}

inline constexpr std::size_t cpu_lanes = 16;   // samples per group: one AVX-512 vector of floats
inline constexpr std::size_t cpu_chunk = 256;  // samples summed in float before joining the double total

// Reusable buffers, so that a training step allocates nothing.
struct cpu_workspace {
  std::vector<float> lane_gradient;  // [parameter][lane]
  std::vector<double> wide_gradient;
};

// Copies samples [first, first + count) of a sample-major matrix into lane-major
// [rows][K], zero-padding the lanes past count.
template <std::size_t Rows, std::size_t K>
inline void load_group(const float* data, std::size_t first, std::size_t count, float* group) {
  for (std::size_t r = 0; r < Rows; ++r)
    for (std::size_t k = 0; k < K; ++k) group[r * K + k] = k < count ? data[(first + k) * Rows + r] : 0.0f;
}

// Mean loss over the batch; its gradient into grad[0, P).
template <model Model, class Loss>
float fused_loss_and_gradient(const Model& model, const Loss& loss, const float* params, const float* x,
                              const float* y, std::size_t batch, float* grad, cpu_workspace& ws) {
  constexpr std::size_t P = Model::parameter_count, In = Model::inputs, Out = Model::outputs, K = cpu_lanes;
  ws.lane_gradient.resize(P * K);
  ws.wide_gradient.assign(P, 0.0);
  float* lanes = ws.lane_gradient.data();
  double total = 0.0;
  group_scratch<Model, K, float> scratch;
  alignas(64) float xg[In * K], yg[Out * K], dout[Out * K], lane_loss[K];
  for (std::size_t first = 0; first < batch; first += cpu_chunk) {
    const std::size_t last = std::min(batch, first + cpu_chunk);
    std::fill(lanes, lanes + P * K, 0.0f);
    float chunk_loss = 0.0f;
    for (std::size_t g = first; g < last; g += K) {
      const std::size_t count = std::min(K, last - g);
      load_group<In, K>(x, g, count, xg);
      load_group<Out, K>(y, g, count, yg);
      const float* yhat = forward_group(model, params, xg, scratch);
      loss.template group<Out, K>(yhat, yg, dout, lane_loss);
      for (std::size_t k = 0; k < K; ++k) {
        if (k < count) {
          chunk_loss += lane_loss[k];
        } else {
          for (std::size_t o = 0; o < Out; ++o) dout[o * K + k] = 0.0f;  // padding adds nothing
        }
      }
      backward_group<Model>(params, xg, scratch, dout, lanes);
    }
    total += chunk_loss;
    for (std::size_t p = 0; p < P; ++p) {
      float sum = 0.0f;
      for (std::size_t k = 0; k < K; ++k) sum += lanes[p * K + k];
      ws.wide_gradient[p] += sum;
    }
  }
  const double scale = 1.0 / Loss::denominator(Out, batch);
  for (std::size_t p = 0; p < P; ++p) grad[p] = static_cast<float>(ws.wide_gradient[p] * scale);
  return static_cast<float>(total * scale);
}

}  // namespace detail

// The model's outputs for every sample of x: shape (outputs, batch).
template <model Model>
matrix apply(const Model& model, const parameters<Model>& params, const matrix& x) {
  detail::check_batch<Model>("apply", x, nullptr);
  constexpr std::size_t K = detail::cpu_lanes, In = Model::inputs, Out = Model::outputs;
  matrix y(Out, x.batch());
  detail::group_scratch<Model, K, float> scratch;
  float xg[In * K];
  for (std::size_t g = 0; g < x.batch(); g += K) {
    const std::size_t count = std::min(K, x.batch() - g);
    detail::load_group<In, K>(x.data(), g, count, xg);
    const float* out = detail::forward_group(model, params.data(), xg, scratch);
    for (std::size_t k = 0; k < count; ++k)
      for (std::size_t o = 0; o < Out; ++o) y(o, g + k) = out[o * K + k];
  }
  return y;
}

// Mean loss over the batch and its gradient with respect to every parameter.
template <model Model, class Loss>
loss_and_gradient<Model> value_and_grad(const Loss& loss, const Model& model, const parameters<Model>& params,
                                        const matrix& x, const matrix& y) {
  detail::check_batch<Model>("value_and_grad", x, &y);
  loss_and_gradient<Model> result{0.0f, parameters<Model>{}};
  detail::cpu_workspace workspace;
  result.loss = detail::fused_loss_and_gradient(model, loss, params.data(), x.data(), y.data(), x.batch(),
                                                result.gradient.data(), workspace);
  return result;
}

}  // namespace tl
