// Checkpoints in safetensors, named as PyTorch names the same model
// (nn/names.hpp: "0.weight" [out, in], "0.bias", ...), so that
//   model.load_state_dict(safetensors.torch.load_file(path))
// loads tl::save(path, params) into the equivalent nn.Sequential. A training state
// adds its optimizer's moments as "optimizer.<slot>.<name>" (PyTorch's slot names:
// exp_avg, exp_avg_sq, momentum_buffer) and the step in the metadata, so a run resumes
// exactly. Values are stored as trained (F32 or F64); F16 and BF16 files (PyTorch's
// half-precision models) load too, widened exactly. Loading reads and checks every
// tensor (names, shapes, dtype, finite values, the model's layer kinds) into
// temporaries first: a bad file throws one tl::io_error or tl::shape_error naming the
// file and the problem, and changes nothing.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tapeless/io/safetensors.hpp"
#include "tapeless/nn/names.hpp"
#include "tapeless/nn/parameters.hpp"
#include "tapeless/train/state.hpp"

namespace tl {

struct load_options {
  bool allow_non_finite = false;  // accept NaN and infinities in the stored values
};

namespace detail {
inline constexpr const char* optimizer_prefix = "optimizer.";

// The layer kinds in order: two models with the same names and shapes but other
// layers or activations do not load into each other.
template <class Model>
std::string model_signature() {
  std::string s;
  for (const auto& row : layer_summary<Model>()) s += (s.empty() ? "" : " ") + row.name + ":" + row.kind;
  return s;
}

// What a checkpoint holds, gathered before anything is written into the caller's state.
template <class T>
struct checkpoint_contents {
  std::vector<T> params;
  std::vector<T> optimizer_state;  // slot by slot, each in the flat parameter order
  long step = 0;
};

template <class Model, class T>
void write_checkpoint(const std::filesystem::path& path, const T* params, const T* optimizer_state,
                      std::span<const char* const> slot_names, const char* optimizer_name, long step) {
  constexpr std::size_t P = Model::parameter_count;
  const auto names = parameter_names<Model>();
  std::vector<tensor_view> tensors;
  for (const auto& n : names) tensors.emplace_back(n.name, std::span<const T>(params + n.offset, n.size()), n.shape);
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"tapeless.model", model_signature<Model>()}};
  if (optimizer_state) {
    for (std::size_t slot = 0; slot < slot_names.size(); ++slot)
      for (const auto& n : names)
        tensors.emplace_back(optimizer_prefix + std::string(slot_names[slot]) + "." + n.name,
                             std::span<const T>(optimizer_state + slot * P + n.offset, n.size()), n.shape);
    metadata["tapeless.optimizer"] = optimizer_name;
    metadata["tapeless.step"] = std::to_string(step);
  }
  save_safetensors(path, tensors, metadata);
}

template <class Model, class T>
checkpoint_contents<T> read_checkpoint(const std::filesystem::path& path, std::span<const char* const> slot_names,
                                       const char* optimizer_name, const load_options& options) {
  constexpr std::size_t P = Model::parameter_count;
  const auto file = load_safetensors(path);
  const auto policy = options.allow_non_finite ? non_finite_values::allow : non_finite_values::reject;
  const auto names = parameter_names<Model>();
  const auto& meta = file.metadata();
  if (const auto found = meta.find("tapeless.model"); found != meta.end() && found->second != model_signature<Model>())
    throw io_error("tapeless: " + path.string() + ": the checkpoint is of another model (its layers: " +
                   found->second + "; this model's: " + model_signature<Model>() + ")");
  if (!slot_names.empty()) {  // before the tensors: an SGD file into an Adam state says so
    const auto kind = meta.find("tapeless.optimizer");
    if (kind == meta.end() || kind->second != optimizer_name)
      throw io_error("tapeless: " + path.string() + ": the checkpoint holds " +
                     (kind == meta.end() ? std::string("no optimizer state") : "the state of " + kind->second) +
                     ", expected " + optimizer_name);
  }
  // Every tensor must be expected: parameters, and the optimizer's when a state is loaded.
  std::set<std::string> expected;
  for (const auto& n : names) expected.insert(n.name);
  for (std::size_t slot = 0; slot < slot_names.size(); ++slot)
    for (const auto& n : names) expected.insert(optimizer_prefix + std::string(slot_names[slot]) + "." + n.name);
  for (const auto& stored : file.names()) {
    const bool optimizer_tensor = stored.rfind(optimizer_prefix, 0) == 0;
    if (!expected.count(stored) && !(optimizer_tensor && slot_names.empty()))
      throw io_error("tapeless: " + path.string() + ": unexpected tensor \"" + stored +
                     "\" (a checkpoint of another model?)");
  }
  checkpoint_contents<T> contents;
  contents.params.resize(P);
  // A refused NaN or infinity names the option that accepts it, in a parameter or in
  // the optimizer's state alike.
  const auto copy = [&](const std::string& name, std::span<T> to, const auto& shape) {
    try {
      file.copy_to<T>(name, to, shape, policy);
    } catch (const io_error& e) {
      if (std::string(e.what()).find("NaN or infinity") == std::string::npos) throw;
      throw io_error(std::string(e.what()) + " (tl::load_options{.allow_non_finite = true} accepts them)");
    }
  };
  for (const auto& n : names) copy(n.name, std::span<T>(contents.params.data() + n.offset, n.size()), n.shape);
  if (!slot_names.empty()) {
    contents.optimizer_state.resize(slot_names.size() * P);
    for (std::size_t slot = 0; slot < slot_names.size(); ++slot)
      for (const auto& n : names)
        copy(optimizer_prefix + std::string(slot_names[slot]) + "." + n.name,
             std::span<T>(contents.optimizer_state.data() + slot * P + n.offset, n.size()), n.shape);
    // The step as save() writes it: decimal digits only (std::stol alone took "" as 0,
    // and " 5" and "+5" as 5).
    const auto step = meta.find("tapeless.step");
    bool valid = step != meta.end() && !step->second.empty() &&
                 step->second.find_first_not_of("0123456789") == std::string::npos;
    if (valid) {
      try {
        contents.step = std::stol(step->second);
      } catch (const std::out_of_range&) {  // past a long
        valid = false;
      }
    }
    if (!valid) throw io_error("tapeless: " + path.string() + ": the metadata has no valid \"tapeless.step\"");
  }
  return contents;
}
}  // namespace detail

// Parameters alone.
template <class Model, class T>
void save(const std::filesystem::path& path, const parameters<Model, T>& params) {
  detail::write_checkpoint<Model, T>(path, params.data(), nullptr, {}, "", 0);
}
template <class Model, class T>
void load(const std::filesystem::path& path, parameters<Model, T>& params, const load_options& options = {}) {
  auto contents = detail::read_checkpoint<Model, T>(path, {}, "", options);
  params = parameters<Model, T>(std::move(contents.params));
}

// A training state: parameters, optimizer moments and step.
template <class Model, class Optimizer, class T>
void save(const std::filesystem::path& path, const train_state<Model, Optimizer, T>& state) {
  detail::write_checkpoint<Model, T>(path, state.params.data(), state.optimizer_state.data(), Optimizer::slot_names,
                                     Optimizer::name, state.step);
}
template <class Model, class Optimizer, class T>
void load(const std::filesystem::path& path, train_state<Model, Optimizer, T>& state, const load_options& options = {}) {
  auto contents = detail::read_checkpoint<Model, T>(path, Optimizer::slot_names, Optimizer::name, options);
  state.params = parameters<Model, T>(std::move(contents.params));
  state.optimizer_state = std::move(contents.optimizer_state);
  state.step = contents.step;
}

}  // namespace tl
