// polyfit's CSV of the fit (x, y, yhat), shared by both models: written by tl::save_csv,
// atomically (a failed run leaves the old file whole) and with every digit.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "seed_fit.hpp"
#include "tapeless/io/csv.hpp"

namespace seed_fit {
inline void save_fit_csv(const std::string& path, const data& d, const tl::matrix& yhat) {
  tl::matrix rows(3, d.x.batch());
  for (std::size_t s = 0; s < d.x.batch(); ++s) {
    rows(0, s) = d.x(0, s);
    rows(1, s) = d.y(0, s);
    rows(2, s) = yhat(0, s);
  }
  tl::save_csv(path, std::vector<std::string>{"x", "y", "yhat"}, rows);
  std::printf("wrote %s\n", path.c_str());
}
}  // namespace seed_fit
