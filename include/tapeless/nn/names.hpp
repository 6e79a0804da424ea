// Names for a model's parameters and a printed summary of its layers (host only).
// Names are those a PyTorch nn.Sequential of the same layers gives in its
// state_dict: "0.weight" [out, in], "0.bias", ... with activations counted as modules
// of their own ("2.weight" follows a dense layer with an activation); a skip block is
// a Sequential whose forward adds its input, so its layers are "1.0.weight", ...;
// layer_norm is LayerNorm ("weight", "bias"). A model that is a single layer has the
// bare names ("weight", "bias"), like the PyTorch module itself.
// The walk over the heterogeneous layer tree is a Boost.Hana fold; device code never
// sees this header.
#pragma once

#include <boost/hana/for_each.hpp>
#include <boost/hana/range.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "tapeless/nn/layer.hpp"

namespace tl {

struct named_parameters {
  std::string name;                // "0.weight"
  std::size_t offset;              // into the model's flat parameter vector
  std::vector<std::size_t> shape;  // row-major: {out, in} or {n}
  std::size_t size() const {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
  }
};

struct layer_summary_row {
  std::string name;  // as in named_parameters: "1", "1.0", ...
  std::string kind;  // "dense(gelu)", "layer_norm", "skip", ...
  std::size_t inputs, outputs, parameters;
};

namespace detail {
template <class L>
std::string layer_kind() {
  std::string kind = [] {
    if constexpr (requires { L::kind; }) return std::string(L::kind);
    else return std::string("layer");
  }();
  if constexpr (requires { L::activation; }) {
    using A = decltype(L::activation);
    if constexpr (requires { A::name; }) kind += std::string("(") + A::name + ")";
  }
  return kind;
}

// Visits every layer type depth first, containers before their sublayers:
// visit(std::type_identity<L>{}, name, offset). Names depend on the model's type only.
template <class Layer, class Visit>
void walk_layers(const std::string& name, std::size_t offset, Visit& visit) {
  visit(std::type_identity<Layer>{}, name, offset);
  if constexpr (layer_container<Layer>) {
    namespace hana = boost::hana;
    std::size_t position = 0;
    hana::for_each(hana::make_range(hana::size_c<0>, hana::size_c<Layer::sublayer_count>), [&](auto i) {
      constexpr std::size_t I = decltype(i)::value;
      using Sub = typename Layer::template layer_type<I>;
      walk_layers<Sub>((name.empty() ? "" : name + ".") + std::to_string(position),
                       offset + Layer::template parameter_offset<I>, visit);
      position += sequential_modules<Sub>();
    });
  }
}
}  // namespace detail

// Every named block of the model's parameters, in flat order.
template <class Model>
std::vector<named_parameters> parameter_names() {
  std::vector<named_parameters> names;
  auto visit = [&]<class L>(std::type_identity<L>, const std::string& name, std::size_t offset) {
    if constexpr (has_parameter_blocks<L>) {
      for (const parameter_block& b : L::parameter_blocks()) {
        std::vector<std::size_t> shape = b.cols ? std::vector<std::size_t>{b.rows, b.cols}
                                                : std::vector<std::size_t>{b.rows};
        names.push_back({(name.empty() ? "" : name + ".") + b.name, offset + b.offset, std::move(shape)});
      }
    }
  };
  detail::walk_layers<Model>("", 0, visit);
  return names;
}
template <class Model>
std::vector<named_parameters> parameter_names(const Model&) { return parameter_names<Model>(); }

// One row per layer, containers included (their sublayers follow them).
template <class Model>
std::vector<layer_summary_row> layer_summary() {
  std::vector<layer_summary_row> rows;
  auto visit = [&]<class L>(std::type_identity<L>, const std::string& name, std::size_t) {
    rows.push_back({name.empty() ? "model" : name, detail::layer_kind<L>(), L::inputs, L::outputs, L::parameter_count});
  };
  detail::walk_layers<Model>("", 0, visit);
  return rows;
}

// The summary as a table, Keras/Lux style.
template <class Model>
std::string summary(const Model&) {
  std::string out = "layer     kind                     inputs  outputs  parameters\n";
  char line[160];
  for (const auto& r : layer_summary<Model>()) {
    std::snprintf(line, sizeof line, "%-9s %-24s %6zu  %7zu  %10zu\n", r.name.c_str(), r.kind.c_str(), r.inputs,
                  r.outputs, r.parameters);
    out += line;
  }
  return out;
}

}  // namespace tl
