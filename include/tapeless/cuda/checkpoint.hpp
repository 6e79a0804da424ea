// Checkpoints of a training state on the GPU: the same file as the CPU state's
// (io/checkpoint.hpp); saving copies the state back first, loading checks the whole
// file on the host before anything reaches the device.
#pragma once

#include <filesystem>
#include <vector>

#include "tapeless/cuda/train.hpp"
#include "tapeless/io/checkpoint.hpp"

namespace tl {

template <class Model, class Optimizer, class T>
void save(const std::filesystem::path& path, const cuda_train_state<Model, Optimizer, T>& state) {
  const std::vector<T> params(state.params.begin(), state.params.end());
  const std::vector<T> moments(state.optimizer_state.begin(), state.optimizer_state.end());
  detail::write_checkpoint<Model, T>(path, params.data(), moments.data(), Optimizer::slot_names, Optimizer::name,
                                     state.step);
}

template <class Model, class Optimizer, class T>
void load(const std::filesystem::path& path, cuda_train_state<Model, Optimizer, T>& state,
          const load_options& options = {}) {
  const auto contents = detail::read_checkpoint<Model, T>(path, Optimizer::slot_names, Optimizer::name, options);
  thrust::copy(contents.params.begin(), contents.params.end(), state.params.begin());
  thrust::copy(contents.optimizer_state.begin(), contents.optimizer_state.end(), state.optimizer_state.begin());
  state.step = contents.step;
  state.step_counter[0] = contents.step;
}

}  // namespace tl
