// The CPU backend: the whole batch in one fused pass. For each group of 16 samples,
// forward, loss, backward and gradient accumulation happen back to back on a few
// kilobytes of stack scratch (no per-layer batch matrices), vectorized across the
// group's samples. Gradients are summed in float per lane over chunks of 256 samples
// and the chunks in double, so large batches stay accurate. Batches of 32768 samples
// and more are split over threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <thread>
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
  std::vector<float> lane_gradient;  // per thread: [parameter][lane]
  std::vector<double> wide_gradient;  // per thread: [parameter]
  std::vector<double> loss;           // per thread
};

// Threads for a batch: one below 32768 samples (starting threads would cost more than
// they save), else one per 16384 samples up to the hardware's; TAPELESS_CPU_THREADS
// overrides the upper bound.
inline std::size_t cpu_threads_for(std::size_t batch) {
  static const std::size_t available = [] {
    if (const char* env = std::getenv("TAPELESS_CPU_THREADS")) {
      const long n = std::strtol(env, nullptr, 10);
      if (n > 0) return static_cast<std::size_t>(n);
    }
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
  }();
  if (batch < 32768) return 1;
  return std::min(available, batch / 16384);
}

// Copies samples [first, first + count) of a sample-major matrix into lane-major
// [rows][K], zero-padding the lanes past count.
template <std::size_t Rows, std::size_t K>
inline void load_group(const float* data, std::size_t first, std::size_t count, float* group) {
  for (std::size_t r = 0; r < Rows; ++r)
    for (std::size_t k = 0; k < K; ++k) group[r * K + k] = k < count ? data[(first + k) * Rows + r] : 0.0f;
}

// Adds the loss and gradient sums of samples [first, last) into wide[0, P) and
// returns the loss sum; `lanes` is P * K floats of scratch.
template <model Model, class Loss>
double accumulate_samples(const Model& model, const Loss& loss, const float* params, const float* x, const float* y,
                          std::size_t first_sample, std::size_t last_sample, float* lanes, double* wide) {
  constexpr std::size_t P = Model::parameter_count, In = Model::inputs, Out = Model::outputs, K = cpu_lanes;
  double total = 0.0;
  group_scratch<Model, K, float> scratch;
  alignas(64) float xg[In * K], yg[Out * K], dout[Out * K], lane_loss[K];
  for (std::size_t first = first_sample; first < last_sample; first += cpu_chunk) {
    const std::size_t last = std::min(last_sample, first + cpu_chunk);
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
      wide[p] += sum;
    }
  }
  return total;
}

// Mean loss over the batch; its gradient into grad[0, P). Large batches are split into
// contiguous ranges of whole chunks, one per thread, joined in a fixed order.
template <model Model, class Loss>
float fused_loss_and_gradient(const Model& model, const Loss& loss, const float* params, const float* x,
                              const float* y, std::size_t batch, float* grad, cpu_workspace& ws) {
  constexpr std::size_t P = Model::parameter_count, K = cpu_lanes;
  const std::size_t threads = cpu_threads_for(batch);
  ws.lane_gradient.resize(threads * P * K);
  ws.wide_gradient.assign(threads * P, 0.0);
  ws.loss.assign(threads, 0.0);
  const auto run = [&](std::size_t t) {
    const std::size_t chunks = (batch + cpu_chunk - 1) / cpu_chunk;
    const std::size_t first = std::min(batch, chunks * t / threads * cpu_chunk);
    const std::size_t last = std::min(batch, chunks * (t + 1) / threads * cpu_chunk);
    ws.loss[t] = accumulate_samples(model, loss, params, x, y, first, last, ws.lane_gradient.data() + t * P * K,
                                    ws.wide_gradient.data() + t * P);
  };
  if (threads == 1) {
    run(0);
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& thread : pool) thread.join();
  }
  double total = 0.0;
  for (std::size_t t = 0; t < threads; ++t) total += ws.loss[t];
  const double scale = 1.0 / Loss::denominator(Model::outputs, batch);
  for (std::size_t p = 0; p < P; ++p) {
    double sum = 0.0;
    for (std::size_t t = 0; t < threads; ++t) sum += ws.wide_gradient[t * P + p];
    grad[p] = static_cast<float>(sum * scale);
  }
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
