// Nonlinear least squares on the CPU for any model (an expression model above all):
//   tl::lsq::result<P> fit = tl::least_squares(model, params, x, y);
// minimises 0.5 sum_i sum_o (w_i (yhat_io - y_io))^2 over the parameters with
// Levenberg-Marquardt (or Gauss-Newton; lsq/solver.hpp) and leaves the solution in
// `params`. The solver asks for the normal equations; they come from one fused pass
// over the data, 16 samples at a time through the model's forward and backward passes
// (the backward pass with dout = 1 gives a sample's Jacobian row), summed per lane
// over a chunk of 256 samples and the chunks with compensated sums, split over threads
// like training's batch loop. No Jacobian matrix exists.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "tapeless/core/scratch.hpp"
#include "tapeless/cpu/batch.hpp"
#include "tapeless/lsq/normal_equations.hpp"
#include "tapeless/lsq/solver.hpp"

namespace tl {

namespace detail {

// Sums of a chunk, per lane: r^2, J^T r and the upper triangle of J^T J.
template <std::size_t P, std::size_t K>
struct lane_normal_equations {
  static constexpr std::size_t upper = P * (P + 1) / 2;
  alignas(64) double squares[K];
  alignas(64) double jtr[P][K];
  alignas(64) double jtj[upper][K];

  void clear() {
    for (auto& v : squares) v = 0;
    for (auto& row : jtr) for (auto& v : row) v = 0;
    for (auto& row : jtj) for (auto& v : row) v = 0;
  }
  // Adds each lane's residual r[k] and Jacobian row j[p * K + k].
  template <class T>
  void add(const T* r, const T* j, bool jacobian) {
    for (std::size_t k = 0; k < K; ++k) squares[k] += double(r[k]) * double(r[k]);
    if (!jacobian) return;
    for (std::size_t a = 0, u = 0; a < P; ++a) {
      for (std::size_t k = 0; k < K; ++k) jtr[a][k] += double(j[a * K + k]) * double(r[k]);
      for (std::size_t b = a; b < P; ++b, ++u)
        for (std::size_t k = 0; k < K; ++k) jtj[u][k] += double(j[a * K + k]) * double(j[b * K + k]);
    }
  }
  // Adds the lanes into compensated totals (r^2, jtr, upper).
  void merge_into(lsq::detail::compensated* totals) const {
    for (std::size_t k = 0; k < K; ++k) {
      totals[0].add(squares[k]);
      for (std::size_t a = 0; a < P; ++a) totals[1 + a].add(jtr[a][k]);
      for (std::size_t u = 0; u < upper; ++u) totals[1 + P + u].add(jtj[u][k]);
    }
  }
};

// The normal equations of the model's residuals at `p`, over samples [first, last),
// into totals (1 + P + P(P+1)/2 compensated sums).
template <model Model, class T>
void accumulate_normal_equations(const Model& model, const T* p, const T* x, const T* y, const T* weights,
                                 std::size_t first_sample, std::size_t last_sample, bool jacobian,
                                 lsq::detail::compensated* totals) {
  constexpr std::size_t P = Model::parameter_count, In = Model::inputs, Out = Model::outputs, K = cpu_lanes;
  group_buffers<Model, K, T> buffers;
  // (core/scratch.hpp: on the heap past 64 KB; the lanes' normal equations take
  // P (P + 1) / 2 x 16 doubles, 2.6 MB at 200 parameters.)
  group_array<lane_normal_equations<P, K>, 1, K> lane_sums;
  lane_normal_equations<P, K>& lanes = *lane_sums.data();
  group_array<T, In * K, K> xgs;
  group_array<T, Out * K, K> ygs, douts;
  group_array<T, P * K, K> grads;
  T *xg = xgs.data(), *yg = ygs.data(), *dout = douts.data(), *grad = grads.data();
  alignas(64) T wg[K], r[K];
  for (std::size_t first = first_sample; first < last_sample; first += cpu_chunk) {
    const std::size_t last = std::min(last_sample, first + cpu_chunk);
    lanes.clear();
    for (std::size_t g = first; g < last; g += K) {
      const std::size_t count = std::min(K, last - g);
      load_group<In, K>(x, g, count, xg);
      load_group<Out, K>(y, g, count, yg);
      for (std::size_t k = 0; k < K; ++k) wg[k] = k < count ? (weights ? weights[g + k] : T(1)) : T(0);
      for (std::size_t o = 0; o < Out; ++o) {
        // The backward pass may overwrite what forward saved: one forward per output.
        const T* yhat = forward_group(model, p, xg, buffers);
        for (std::size_t k = 0; k < K; ++k) r[k] = wg[k] * (yhat[o * K + k] - yg[o * K + k]);
        if (jacobian) {
          for (std::size_t j = 0; j < Out * K; ++j) dout[j] = T(0);
          for (std::size_t k = 0; k < K; ++k) dout[o * K + k] = wg[k];  // d r / d yhat
          for (std::size_t j = 0; j < P * K; ++j) grad[j] = T(0);
          backward_group(model, p, xg, buffers, dout, grad);
        }
        lanes.add(r, grad, jacobian);
      }
    }
    lanes.merge_into(totals);
  }
}

// The solver's evaluate(): the fused pass, over threads, into normal_equations.
template <model Model, class T>
lsq::normal_equations<Model::parameter_count> normal_equations_at(const Model& model,
                                                                  const std::array<double, Model::parameter_count>& at,
                                                                  const basic_matrix<T>& x, const basic_matrix<T>& y,
                                                                  const T* weights, bool jacobian) {
  constexpr std::size_t P = Model::parameter_count, N = lsq::packed_sums<P>;
  std::array<T, P> p;
  for (std::size_t j = 0; j < P; ++j) p[j] = static_cast<T>(at[j]);
  const std::size_t batch = x.batch();
  // Whole chunks a thread (split_range's unit, cpu/parallel.hpp): each thread's lanes hold
  // P(P+1)/2 x 16 sums, cleared and merged a chunk at a time, far more than a few
  // samples' work.
  const std::size_t threads = cpu_step_threads(0, batch, P * (P + 3) / 2, lsq_work_per_thread, cpu_chunk);
  std::vector<lsq::detail::compensated> totals(threads * N);
  for_each_range(batch, threads, [&](std::size_t t, std::size_t first, std::size_t last) {
    accumulate_normal_equations(model, p.data(), x.data(), y.data(), weights, first, last, jacobian,
                                totals.data() + t * N);
  }, cpu_chunk);
  for (std::size_t t = 1; t < threads; ++t)
    for (std::size_t i = 0; i < N; ++i) totals[i].add(totals[t * N + i]);
  std::size_t used = batch;
  if (weights) used = std::size_t(std::count_if(weights, weights + batch, [](T w) { return w != T(0); }));
  return lsq::unpack_normal_equations<P>([&](std::size_t i) { return totals[i].value(); }, used * Model::outputs);
}
}  // namespace detail

// Fits the model's parameters to (x, y) by least squares, starting from `params` and
// leaving the solution there. weights: one per sample (empty: all 1), multiplying its
// residuals (w = 1 / sigma for measurement errors sigma); a zero weight drops a sample.
// Any contiguous range of T converts (a std::vector, an array; T is not deduced from it).
// A NaN or infinite residual at the start throws tl::numeric_error and changes nothing.
template <model Model, class T>
lsq::result<Model::parameter_count> least_squares(const Model& model, parameters<Model, T>& params,
                                                  const basic_matrix<T>& x, const basic_matrix<T>& y,
                                                  const lsq::options& options = {},
                                                  std::type_identity_t<std::span<const T>> weights = {}) {
  constexpr std::size_t P = Model::parameter_count;
  detail::check_batch<Model>("least_squares", x, &y);
  if (!weights.empty()) detail::require_size("least_squares", "the number of weights (one per sample)", x.batch(), weights.size());
  std::array<double, P> start;
  for (std::size_t j = 0; j < P; ++j) start[j] = double(params.flat()[j]);
  const T* w = weights.empty() ? nullptr : weights.data();
  auto evaluate = [&](const std::array<double, P>& at, lsq::normal_equations<P>& out, bool jacobian) {
    out = detail::normal_equations_at(model, at, x, y, w, jacobian);
  };
  const auto result = lsq::solve(evaluate, start, options);
  for (std::size_t j = 0; j < P; ++j) params.flat()[j] = static_cast<T>(result.parameters[j]);
  return result;
}

}  // namespace tl
