// The CPU backend: the whole batch in one fused pass. The lane pass (here): for each
// group of 16 samples, forward, loss, backward and gradient accumulation happen back
// to back on a few kilobytes of stack scratch for most models, a per-thread scratch
// stack for wide ones (core/scratch.hpp; no per-layer batch matrices),
// vectorized across the group's samples. Gradients are summed per lane over chunks of
// 256 samples and the chunks in double, so large batches stay accurate. Chains of
// wide dense layers take the blocked pass instead (cpu/blocked_chain.hpp; the choice:
// cpu/pass_choice.hpp). When a step holds enough work, the batch is split into
// contiguous ranges (of whole 64-sample units: cpu/parallel.hpp) over a persistent
// thread pool and the ranges are joined in a fixed order: the result depends on the
// thread count, never on timing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tapeless/core/scratch.hpp"
#include "tapeless/cpu/blocked_chain.hpp"
#include "tapeless/cpu/parallel.hpp"
#include "tapeless/cpu/pass_choice.hpp"
#include "tapeless/nn/matrix.hpp"
#include "tapeless/nn/sample_pass.hpp"
#include "tapeless/train/state.hpp"

namespace tl {

namespace detail {

inline constexpr std::size_t cpu_lanes = 16;  // samples per group: one AVX-512 vector of floats
// cpu_chunk (cpu/parallel.hpp): samples summed per lane before joining the double total

// Work per thread of the blocked pass, in its own units (blocked_chain's
// work_per_sample: multiply-adds and activations; about 20 a nanosecond on one core
// of the development machine), below which a second thread costs more than it saves.
// Measured: docs/performance.md, "CPU threads".
inline constexpr double blocked_work_per_thread = double(1 << 18);

// Reusable buffers, so that a training step allocates nothing after the first.
template <class T>
struct cpu_workspace {
  std::vector<double> wide_gradient;  // per thread: [parameter]
  std::vector<double> loss;           // per thread
  std::vector<double> check;          // per part of the join: 0 unless a sum is not finite
  simd::aligned_buffer<T> packed;     // the blocked pass's weights, rearranged once a step
  // What `packed` was packed from, when apply packed it: the model type's layout (a
  // tag, one address per type) and a copy of the parameters; null after a training
  // step's packing, whose parameters change every step.
  const void* packed_for = nullptr;
  std::vector<T> packed_from;
};
template <class T>
cpu_workspace<T>& workspace_for_this_thread() {
  thread_local cpu_workspace<T> workspace;
  return workspace;
}

// How many passes (steps, applies) are running on this thread: one started inside
// another (a user's loss or layer that calls tl::apply or value_and_grad inside a
// step, on the calling thread or on a worker; the pool runs such a call inline) must
// not use the thread's workspace or the blocked pass's thread buffer, which the pass
// around it is still reading: it would repack the weights and overwrite its sums.
inline int& passes_running_here() {
  thread_local int running = 0;
  return running;
}
struct pass_running {  // marks this thread for a scope
  pass_running() { ++passes_running_here(); }
  ~pass_running() { --passes_running_here(); }
  pass_running(const pass_running&) = delete;
  pass_running& operator=(const pass_running&) = delete;
};

// The workspace and blocked-pass buffers for one pass: this thread's, or, for a pass
// nested in another, its own for its duration.
template <class T>
class workspace_lease {
 public:
  workspace_lease() : nested_(passes_running_here() > 0) {}
  workspace_lease(const workspace_lease&) = delete;
  workspace_lease& operator=(const workspace_lease&) = delete;
  cpu_workspace<T>& get() { return nested_ ? own_ : workspace_for_this_thread<T>(); }
  // The blocked pass's per-thread buffer, from the thread that calls (a nested pass runs
  // all its ranges inline on one thread, so one buffer of its own does).
  template <class Pass>
  T* chain_buffer() {
    if (!nested_) return Pass::thread_buffer();
    if (own_buffer_.size() < Pass::buffer_size) own_buffer_ = simd::aligned_buffer<T>(Pass::buffer_size);
    return own_buffer_.data();
  }

 private:
  const bool nested_;       // (read before running_ counts this pass)
  pass_running running_;
  cpu_workspace<T> own_;  // (empty, and left so, unless nested)
  simd::aligned_buffer<T> own_buffer_;
};

// The blocked pass's weights, rearranged for its products (once a step, or an apply),
// into this thread's workspace; in parts on the pool for large models. `reuse` (apply):
// when the workspace holds this model type's weights packed from the same parameters
// (compared bit for bit), they are used as they are. Packing reads the parameters and
// writes them twice, in panels; the comparison only reads them, and stops at the first
// difference: an apply of a few samples of a 2-256x3-1 model took 188 us, most of it
// packing, again at every call (docs/performance.md, 2026-12-06 (day)).
template <class Model, class T>
const T* packed_weights(const T* params, cpu_workspace<T>& ws, bool reuse = false) {
  using pass_type = blocked_chain<Model, T>;
  constexpr std::size_t P = Model::parameter_count;
  const void* layout = &pass_type::packed_size;  // (an inline variable: one address per type)
  if (reuse && ws.packed_for == layout && std::memcmp(ws.packed_from.data(), params, P * sizeof(T)) == 0)
    return ws.packed.data();
  ws.packed_for = nullptr;
  if (ws.packed.size() < pass_type::packed_size) ws.packed = simd::aligned_buffer<T>(pass_type::packed_size);
  T* packed = ws.packed.data();
  const std::size_t parts = cpu_threads_for_values(pass_type::packed_size);
  for_each_part(parts, parts, [&](std::size_t part, std::size_t, std::size_t) { pass_type::pack(params, packed, part, parts); });
  if (reuse) {
    ws.packed_from.assign(params, params + P);
    ws.packed_for = layout;
  }
  return packed;
}

// Copies samples [first, first + count) of a sample-major matrix into lane-major
// [rows][K]. The lanes past count repeat the last sample: a padding of zeros could be
// outside the model's domain (log(x) at x = 0) and turn the lanes' sums into NaN, even
// though their contributions are multiplied by 0.
template <std::size_t Rows, std::size_t K, class T>
inline void load_group(const T* data, std::size_t first, std::size_t count, T* group) {
  for (std::size_t r = 0; r < Rows; ++r)
    for (std::size_t k = 0; k < K; ++k) group[r * K + k] = data[(first + (k < count ? k : count - 1)) * Rows + r];
}

// Adds the loss and gradient sums of samples [first, last) into wide[0, P) and
// returns the loss sum; `lanes` is P * K values of scratch.
template <model Model, class Loss, class T>
double accumulate_samples(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                          std::size_t first_sample, std::size_t last_sample, T* lanes, double* wide) {
  constexpr std::size_t P = Model::parameter_count, In = Model::inputs, Out = Model::outputs, K = cpu_lanes;
  double total = 0.0;
  group_buffers<Model, K, T> buffers;
  group_array<T, In * K, K> xg;  // (core/scratch.hpp: on the heap for wide inputs)
  group_array<T, Out * K, K> yg, dout;
  alignas(64) T lane_loss[K];
  for (std::size_t first = first_sample; first < last_sample; first += cpu_chunk) {
    const std::size_t last = std::min(last_sample, first + cpu_chunk);
    std::fill(lanes, lanes + P * K, T(0));
    T chunk_loss = T(0);
    for (std::size_t g = first; g < last; g += K) {
      const std::size_t count = std::min(K, last - g);
      load_group<In, K>(x, g, count, xg.data());
      load_group<Out, K>(y, g, count, yg.data());
      const T* yhat = forward_group(model, params, xg.data(), buffers);
      loss.template group<Out, K>(yhat, yg.data(), dout.data(), lane_loss);
      for (std::size_t k = 0; k < K; ++k) {
        if (k < count) {
          chunk_loss += lane_loss[k];
        } else {
          for (std::size_t o = 0; o < Out; ++o) dout.data()[o * K + k] = T(0);  // padding adds nothing
        }
      }
      backward_group(model, params, xg.data(), buffers, dout.data(), lanes);
    }
    total += chunk_loss;
    for (std::size_t p = 0; p < P; ++p) {
      T sum = T(0);
      for (std::size_t k = 0; k < K; ++k) sum += lanes[p * K + k];
      wide[p] += sum;
    }
  }
  return total;
}

template <class T>
struct loss_sum {
  T loss;                  // mean over the batch
  bool gradient_finite;    // every gradient entry is finite
};

// Mean loss over the batch; its gradient into grad[0, P). A range of samples per thread
// (cpu/parallel.hpp, split_range), joined in a fixed order. Whether the gradient is finite comes from the
// same pass: the double sum of its entries is NaN or infinite exactly when one is.
// threads = 0: by work. Pass: cpu_pass::automatic chooses (cpu/pass_choice.hpp);
// lanes or blocked (tests, benchmarks) take that pass, where the model allows it.
template <cpu_pass Pass = cpu_pass::automatic, model Model, class Loss, class T>
loss_sum<T> fused_loss_and_gradient(const Model& model, const Loss& loss, const T* params, const T* x, const T* y,
                                    std::size_t batch, T* grad, std::size_t threads = 0) {
  constexpr std::size_t P = Model::parameter_count, K = cpu_lanes;
  // Each thread's double sums a cache line (64 bytes) clear of the next thread's: a
  // line that two cores write travels between them each time (the lane sums, packed so,
  // made 2 threads take 0.75 of one thread's time on 2-16-1 at 10^5 samples,
  // docs/performance.md 2026-12-07); these are written once a 256-sample chunk.
  constexpr std::size_t wide_stride = P + 64 / sizeof(double);
  (void)lanes_forced_by_environment();  // a bad TAPELESS_CPU_PASS is reported for every model
  workspace_lease<T> lease;
  cpu_workspace<T>& ws = lease.get();
  bool blocked = false;
  if constexpr (blocked_pass_compiled<Model, Pass>()) {
    blocked = runs_blocked_pass<Model, Pass>();
    if (blocked) {
      using pass_type = blocked_chain<Model, T>;
      threads = cpu_step_threads(threads, batch, pass_type::work_per_sample, blocked_work_per_thread);
      const T* packed = packed_weights<Model>(params, ws);
      ws.wide_gradient.resize(threads * wide_stride);
      ws.loss.assign(threads, 0.0);
      for_each_range(batch, threads, [&](std::size_t t, std::size_t first, std::size_t last) {
        const pass_running running;
        double* sums = ws.wide_gradient.data() + t * wide_stride;
        std::fill(sums, sums + P, 0.0);  // here, by the thread that adds into them
        ws.loss[t] = pass_type::accumulate(model, loss, packed, x, y, first, last,
                                           lease.template chain_buffer<pass_type>(), sums);
      });
    }
  }
  if (!blocked) {
    threads = cpu_step_threads(threads, batch, P);
    ws.wide_gradient.assign(threads * wide_stride, 0.0);
    ws.loss.assign(threads, 0.0);
    using lane_sums_type = group_array<T, P * K, K, false>;  // (named here: g++ 12 fails on it inside the lambda)
    for_each_range(batch, threads, [&](std::size_t t, std::size_t first, std::size_t last) {
      const pass_running running;
      // The per-lane sums, P * K values that every group adds into in whole vectors: the
      // thread's own, from its scratch stack (core/scratch.hpp), cache-line aligned, in
      // blocks of its own. They had been one std::vector for all threads, a line apart:
      // from its 16-byte aligned base a vector of them could straddle two lines, the L2's
      // stream prefetcher took the next thread's lines, and how a sum's address fell
      // against the group arrays' mod 4 KB (a load after a store to the same page offset
      // waits for it) differed between the calling thread and a pool worker. 2-32-1 tanh
      // on 2 cores: 1518-1551 -> 1097-1127 us a step at 10^5 samples (docs/performance.md,
      // 2026-12-07 (night)).
      lane_sums_type lane_sums;
      ws.loss[t] = accumulate_samples(model, loss, params, x, y, first, last, lane_sums.data(),
                                      ws.wide_gradient.data() + t * wide_stride);
    });
  }
  double total = 0.0;
  for (std::size_t t = 0; t < threads; ++t) total += ws.loss[t];
  const double scale = 1.0 / Loss::denominator(Model::outputs, batch);
  // Each parameter's sum over threads in thread order, whichever part computes it. The
  // join reads threads x P sums, so its parts follow that count (by P alone, a 16-thread
  // step of a 2-256x3-1 model at 1000 samples joined 2.1 M sums on 2 threads); each part
  // adds a block of parameters thread after thread, a vector loop over each thread's
  // contiguous sums, with the block in L1.
  const std::size_t join_parts = std::min(cpu_threads_for_values(P * threads), std::max<std::size_t>(1, P / 1024));
  ws.check.assign(join_parts, 0.0);
  for_each_part(P, join_parts, [&](std::size_t part, std::size_t first, std::size_t last) {
    constexpr std::size_t block = 1024, K = 16;  // 8 KB of sums
    alignas(64) double sum[block];
    // 0 unless some sum is NaN or infinite; in K independent lanes (one running sum
    // was a chain of dependent adds, 4 cycles a parameter: 156 us for 133 k)
    double check[K] = {};
    for (std::size_t p0 = first; p0 < last; p0 += block) {
      const std::size_t n = std::min(block, last - p0);
      std::fill(sum, sum + block, 0.0);
      for (std::size_t t = 0; t < threads; ++t) {
        const double* from = ws.wide_gradient.data() + t * wide_stride + p0;
        for (std::size_t i = 0; i < n; ++i) sum[i] += from[i];
      }
      for (std::size_t i = 0; i < n; ++i) grad[p0 + i] = static_cast<T>(sum[i] * scale);
      for (std::size_t i = 0; i < block; i += K)  // (past n: zeros)
        for (std::size_t k = 0; k < K; ++k) check[k] += 0.0 * sum[i + k];
    }
    double any = 0.0;
    for (const double c : check) any += c;
    ws.check[part] = any;
  });
  double check = 0.0;
  for (const double c : ws.check) check += c;
  return {static_cast<T>(total * scale), check == 0.0};
}

}  // namespace detail

// The model's outputs for every sample of x: shape (outputs, batch). The forward of
// the pass a training step takes (cpu/pass_choice.hpp), over threads by work as a step
// is (a forward is about a third of a step's work); each sample's outputs are the same
// whatever the thread count. (It was one thread on the lane pass for every model: 11x
// a whole training step for 2-256x3-1, docs/performance.md 2026-12-06.)
template <model Model, class T>
basic_matrix<T> apply(const Model& model, const parameters<Model, T>& params, const basic_matrix<T>& x) {
  detail::check_batch<Model>("apply", x);
  (void)detail::lanes_forced_by_environment();  // a bad TAPELESS_CPU_PASS is reported here too
  constexpr std::size_t K = detail::cpu_lanes, In = Model::inputs, Out = Model::outputs;
  const std::size_t batch = x.batch();
  basic_matrix<T> y(Out, batch);
  if constexpr (detail::blocked_pass_compiled<Model, cpu_pass::automatic>()) {
    if (detail::runs_blocked_pass<Model, cpu_pass::automatic>()) {
      using pass_type = detail::blocked_chain<Model, T>;
      const std::size_t threads =
          detail::cpu_step_threads(0, batch, pass_type::work_per_sample / 3 + 1, detail::blocked_work_per_thread);
      detail::workspace_lease<T> lease;
      const T* packed = detail::packed_weights<Model>(params.data(), lease.get(), true);
      detail::for_each_range(batch, threads, [&](std::size_t, std::size_t first, std::size_t last) {
        const detail::pass_running running;
        pass_type::outputs(model, packed, x.data(), first, last, lease.template chain_buffer<pass_type>(), y.data());
      });
      return y;
    }
  }
  const std::size_t threads = detail::cpu_step_threads(0, batch, Model::parameter_count / 3 + 1);
  detail::for_each_range(batch, threads, [&](std::size_t, std::size_t first, std::size_t last) {
    detail::group_buffers<Model, K, T> buffers;
    detail::group_array<T, In * K, K> xg;
    for (std::size_t g = first; g < last; g += K) {
      const std::size_t count = std::min(K, last - g);
      detail::load_group<In, K>(x.data(), g, count, xg.data());
      const T* out = detail::forward_group(model, params.data(), xg.data(), buffers);
      for (std::size_t k = 0; k < count; ++k)
        for (std::size_t o = 0; o < Out; ++o) y(o, g + k) = out[o * K + k];
    }
  });
  return y;
}

template <model Model, class T, class U>
  requires(!detail::same_precision<T, U>)
basic_matrix<T> apply(const Model&, const parameters<Model, T>&, const basic_matrix<U>&) {
  (void)detail::check_same_precision<T, U>();
  return {};
}

// The outputs of a state's model at its current parameters (as apply(cuda_state, x) on
// the GPU).
template <model Model, class Optimizer, class T, class U>
basic_matrix<T> apply(const train_state<Model, Optimizer, T>& state, const basic_matrix<U>& x) {
  return apply(state.model, state.params, x);
}

// Mean loss over the batch and its gradient with respect to every parameter.
template <class Loss, model Model, class T>
loss_and_gradient<Model, T> value_and_grad(const Loss& loss, const Model& model, const parameters<Model, T>& params,
                                           const basic_matrix<T>& x, const basic_matrix<T>& y) {
  loss_and_gradient<Model, T> result{T(0), parameters<Model, T>{}};
  if constexpr (check_loss<Loss>()) {
    detail::check_batch<Model>("value_and_grad", x, &y);
    result.loss = detail::fused_loss_and_gradient(model, loss, params.data(), x.data(), y.data(), x.batch(),
                                                  result.gradient.data())
                      .loss;
  }
  return result;
}

template <class Loss, model Model, class T, class U, class V>
  requires(!detail::same_precision<T, U, V>)
loss_and_gradient<Model, T> value_and_grad(const Loss&, const Model&, const parameters<Model, T>&,
                                           const basic_matrix<U>&, const basic_matrix<V>&) {
  (void)detail::check_same_precision<T, U, V>();
  return {};
}

}  // namespace tl
