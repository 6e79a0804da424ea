// The layer-at-a-time path's view of a model (cuda/layered.hpp runs it): its layers
// flattened into stages (nn/stages.hpp) and presented as a chain, so that the path's
// plan and kernels index stage L as they index a dense chain's layer L:
//   depth, layer_type<L>, parameter_offset<L>, output_offset<L>, sublayer<L>()
// A dense stage's layer_type is its dense layer; any other stage's is the stage itself
// (its inputs and outputs), and sublayer<L>() gives its layer (a sample stage: the
// layer_norm, the user's layer) or the stage (a skip's open or close). A chain of dense
// layers gives the same types and offsets as the chain itself.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tapeless/nn/dense_chain.hpp"
#include "tapeless/nn/stages.hpp"

namespace tl::detail::gpu {

template <class Stage>
struct stage_layer {
  using type = Stage;
};
template <class Layer, std::size_t Offset>
struct stage_layer<layer_stage<stage_kind::dense, Layer, Offset>> {
  using type = Layer;
};

template <class Model>
struct layered_model {
  using model_type = Model;
  using stages_type = stages_of<Model>;
  static constexpr std::size_t depth = stage_count<stages_type>;
  static constexpr std::size_t inputs = Model::inputs, outputs = Model::outputs;
  static constexpr std::size_t parameter_count = Model::parameter_count;
  template <std::size_t L>
  using stage = std::tuple_element_t<L, stages_type>;
  template <std::size_t L>
  using layer_type = typename stage_layer<stage<L>>::type;
  template <std::size_t L>
  static constexpr std::size_t parameter_offset = stage<L>::offset;

 private:
  static constexpr std::array<std::size_t, depth + 1> output_offsets = [] {
    std::array<std::size_t, depth + 1> at{};
    [&]<std::size_t... L>(std::index_sequence<L...>) { ((at[L + 1] = at[L] + stage<L>::outputs), ...); }(
        std::make_index_sequence<depth>{});
    return at;
  }();

 public:
  // Where stage L's outputs (and its slopes or deltas) start, in units of a sample.
  template <std::size_t L>
  static constexpr std::size_t output_offset = output_offsets[L];

  stages_type stages;
  explicit layered_model(const Model& model) : stages(flatten_stages<0>(model)) {}

  template <std::size_t L>
  const auto& sublayer() const {
    if constexpr (stage<L>::kind == stage_kind::dense || stage<L>::kind == stage_kind::sample) return std::get<L>(stages).layer;
    else return std::get<L>(stages);
  }
};

// The path's view of Model: a chain of dense layers is its own (no stages to build,
// which would cost its programs' builds about 0.7 s of nvcc's time).
template <class Model>
using layered_view = std::conditional_t<is_dense_chain<Model>::value, Model, layered_model<Model>>;
template <class Model>
decltype(auto) as_layered(const Model& model) {
  if constexpr (is_dense_chain<Model>::value) return (model);
  else return layered_model<Model>(model);
}

// Whether stage L is a dense layer (every layer of a plain dense chain, which the
// path's benchmarks pass as it is, is).
template <class Model, std::size_t L>
constexpr stage_kind kind_at() {
  if constexpr (requires { typename Model::stages_type; }) return Model::template stage<L>::kind;
  else return stage_kind::dense;
}
template <class Model, std::size_t L>
constexpr bool dense_at() { return kind_at<Model, L>() == stage_kind::dense; }
template <class Model>
inline constexpr bool all_dense = []<std::size_t... L>(std::index_sequence<L...>) {
  return (dense_at<Model, L>() && ...);
}(std::make_index_sequence<Model::depth>{});

// Per sample, what a chunk keeps beside the stages' outputs and deltas: each sample
// stage's saved values (its forward's, for its backward), then one row of per-sample
// gradients as wide as the largest sample stage's parameters (the stages' backward
// kernels write them one stage at a time; a product with ones adds them up).
template <class Model, std::size_t L>
constexpr std::size_t sample_saved() {
  if constexpr (kind_at<Model, L>() == stage_kind::sample) return Model::template layer_type<L>::layer_type::saved_count;
  else return 0;
}
template <class Model, std::size_t L>
constexpr std::size_t sample_parameters() {
  if constexpr (kind_at<Model, L>() == stage_kind::sample) return Model::template layer_type<L>::parameter_count;
  else return 0;
}
template <class Model, std::size_t L>
inline constexpr std::size_t saved_offset = []<std::size_t... I>(std::index_sequence<I...>) {
  return (std::size_t(0) + ... + sample_saved<Model, I>());
}(std::make_index_sequence<L>{});
template <class Model>
inline constexpr std::size_t saved_total = saved_offset<Model, Model::depth>;
template <class Model>
inline constexpr std::size_t sample_gradient_width = []<std::size_t... I>(std::index_sequence<I...>) {
  return std::max({std::size_t(0), sample_parameters<Model, I>()...});
}(std::make_index_sequence<Model::depth>{});
// Memory a chunk keeps per sample beyond the stages' outputs and deltas.
template <class Model>
inline constexpr std::size_t sample_stage_values = saved_total<Model> + sample_gradient_width<Model>;

}  // namespace tl::detail::gpu
