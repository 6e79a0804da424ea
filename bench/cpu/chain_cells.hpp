// What the CPU benchmarks of wide dense chains share (dense_chain_step.cpp,
// thread_scaling.cpp): the grid's models and data for any width (bench/grid/grid.hpp
// builds them for one width a program), a step's FLOPs, the command line, medians.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace bench {

// "32,128,1e5" -> {32, 128, 100000}.
inline std::vector<std::size_t> sizes(const char* list) {
  std::vector<std::size_t> out;
  for (const char* c = list; *c;) {
    char* end;
    out.push_back(std::size_t(std::strtod(c, &end)));  // "1e5" reads
    c = *end == ',' ? end + 1 : end;
    if (end == c && *c) break;
  }
  return out;
}

inline bool wanted(const std::vector<std::size_t>& list, std::size_t v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// Every value of `list` (the option `name`) is one the program was built for, else the
// program ends naming them: a width or depth that is not built would otherwise time
// nothing and print only the header.
inline void require_built(const char* name, const std::vector<std::size_t>& list,
                          const std::vector<std::size_t>& built) {
  for (const std::size_t v : list)
    if (!wanted(built, v)) {
      std::string have;
      for (const std::size_t b : built) have += (have.empty() ? "" : ",") + std::to_string(b);
      std::fprintf(stderr, "%s %zu is not built; this program has %s\n", name, v, have.c_str());
      std::exit(2);
    }
}

// The widths and depths a program is built for, as types: the one list each that the
// options are checked against (before the table's header, `header`) and the cells are
// instantiated from. cells(width, depth) runs one wanted pair, both as
// std::integral_constant, width by width and depth by depth in the lists' order.
template <std::size_t... Values>
struct built {};
template <std::size_t... Widths, std::size_t... Depths, class Header, class Cells>
void run_built(built<Widths...>, built<Depths...>, const std::vector<std::size_t>& widths,
               const std::vector<std::size_t>& depths, const Header& header, const Cells& cells) {
  require_built("--widths", widths, {Widths...});
  require_built("--depths", depths, {Depths...});
  header();
  const auto width_cells = [&](auto width) {
    if (wanted(widths, width))
      ((wanted(depths, Depths) ? cells(width, std::integral_constant<std::size_t, Depths>{}) : void()), ...);
  };
  (width_cells(std::integral_constant<std::size_t, Widths>{}), ...);
}

// "--name value" pairs: take(name, value) returns false for a name it does not know,
// which ends the program with a pointer to the `source` file's header comment.
template <class Take>
void read_options(int argc, char** argv, const char* source, const Take& take) {
  for (int i = 1; i + 1 < argc; i += 2)
    if (!take(std::string(argv[i]), argv[i + 1])) {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of %s)\n", argv[i], source);
      std::exit(2);
    }
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// 2 -> Width -> ... -> Width -> 1, Depth dense layers, tanh on the hidden ones.
template <std::size_t Width, std::size_t Depth>
auto make_mlp() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return tl::chain(tl::dense<2, Width>(tl::tanh), ((void)I, tl::dense<Width, Width>(tl::tanh))...,
                     tl::dense<Width, 1>());
  }(std::make_index_sequence<Depth - 2>{});
}

// FLOPs of a full-batch step: 6 B In Out per layer (forward, input delta, weight
// gradient); activations and the optimizer count as zero.
inline double chain_flops(std::size_t width, std::size_t depth, std::size_t batch) {
  const double w = double(width);
  return 6.0 * double(batch) * (2 * w + double(depth - 2) * w * w + w);
}

// The grid's batch (bench/grid/grid.hpp): an additive recurrence in [-2, 2)^2, y =
// sin(x0) cos(x1).
inline void grid_batch(std::size_t batch, tl::matrix& x, tl::matrix& y) {
  x = tl::matrix(2, batch);
  y = tl::matrix(1, batch);
  for (std::size_t s = 0; s < batch; ++s) {
    const double a = 0.5 + double(s) * 0.7548776662466927, b = 0.5 + double(s) * 0.5698402909980532;
    x(0, s) = float(-2.0 + 4.0 * (a - std::floor(a)));
    x(1, s) = float(-2.0 + 4.0 * (b - std::floor(b)));
    y(0, s) = float(std::sin(double(x(0, s))) * std::cos(double(x(1, s))));
  }
}

}  // namespace bench
