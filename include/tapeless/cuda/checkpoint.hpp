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
  const std::vector<T> params = state.params.to_host();
  const std::vector<T> moments = state.optimizer_state.to_host();
  detail::write_checkpoint<Model, T>(path, params.data(), moments.data(), Optimizer::slot_names, Optimizer::name,
                                     state.step);
}

template <class Model, class Optimizer, class T>
void load(const std::filesystem::path& path, cuda_train_state<Model, Optimizer, T>& state,
          const load_options& options = {}) {
  const auto contents = detail::read_checkpoint<Model, T>(path, Optimizer::slot_names, Optimizer::name, options);
  state.params.assign(contents.params.data(), contents.params.size());
  state.optimizer_state.assign(contents.optimizer_state.data(), contents.optimizer_state.size());
  state.step = contents.step;
  state.step_counter.set(0, contents.step);
}

}  // namespace tl
