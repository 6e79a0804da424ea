// polyfit --model polynomial: the seed's quadratic a x^2 + b x + c fitted by least
// squares. Its own translation unit, built beside polyfit.cpp's in parallel, so that
// the least-squares solver adds nothing to the seed example's build time.
#pragma once

#include <string>

#include "seed_fit.hpp"

// Fits, prints the result and writes the CSV to csv_path (polyfit_csv.hpp).
int fit_polynomial(const seed_fit::data& data, const std::string& device_name, const std::string& csv_path);
