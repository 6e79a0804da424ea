// Reader for NIST StRD nonlinear regression files (tests/data/nist/*.dat): starting
// points, certified values, and the data. The model is only text in these files; each
// test writes it as a tapeless lambda.
//
// The format (fixed by NIST, CRLF line ends): a header; a block of lines
//   "  b1 =   500         250           2.3894212918E+02  2.7070075241E+00"
// (start 1, start 2, certified value, certified standard deviation); lines
//   "Residual Sum of Squares:   1.2455138894E-01" and "Number of Observations: 14";
// then a line "Data:   y   x" (or "y  x1  x2") after which every non-blank line is
// one observation: the response first, then the predictors.
#pragma once

#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tl_test::nist {

struct problem {
  std::string name;
  std::string difficulty;  // "Lower", "Average" or "Higher"
  std::size_t parameters = 0, predictors = 0, observations = 0, degrees_of_freedom = 0;
  std::vector<double> start1, start2, certified, certified_std_dev;
  double certified_rss = 0;
  double certified_residual_std_dev = 0;
  std::vector<double> y;
  std::vector<double> x;  // sample-major: x[i * predictors + k]
};

namespace detail {
inline std::vector<double> numbers(const std::string& text) {
  std::vector<double> out;
  const char* p = text.c_str();
  for (;;) {
    char* end = nullptr;
    const double v = std::strtod(p, &end);
    if (end == p) break;
    out.push_back(v);
    p = end;
  }
  return out;
}

inline std::string after(const std::string& line, const std::string& label) {
  return line.substr(line.find(label) + label.size());
}

inline bool starts_with_word(const std::string& line, const std::string& word) {
  const auto first = line.find_first_not_of(' ');
  return first != std::string::npos && line.compare(first, word.size(), word) == 0;
}

// "  b12 = ...": a parameter line.
inline bool is_parameter_line(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first != std::string::npos && first + 1 < line.size() && line[first] == 'b' &&
         std::isdigit(static_cast<unsigned char>(line[first + 1])) && line.find('=') != std::string::npos;
}
}  // namespace detail

inline problem read(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("nist: cannot open " + file.string());
  const auto fail = [&](const std::string& why) { throw std::runtime_error("nist: " + file.string() + ": " + why); };
  problem prob;
  prob.name = file.stem().string();
  bool in_data = false;
  std::size_t columns = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (in_data) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      const auto row = detail::numbers(line);
      if (columns == 0) columns = row.size();
      if (row.size() != columns || columns < 2) {
        fail("data line with " + std::to_string(row.size()) + " numbers: " + line);
      }
      prob.y.push_back(row[0]);
      prob.x.insert(prob.x.end(), row.begin() + 1, row.end());
      continue;
    }
    for (const char* level : {"Lower", "Average", "Higher"}) {
      if (line.find(std::string(level) + " Level of Difficulty") != std::string::npos) prob.difficulty = level;
    }
    if (detail::is_parameter_line(line)) {
      // "b<k> = start1 start2 certified std-dev"; k must count up from 1.
      const auto eq = line.find('=');
      const std::size_t k = std::stoul(line.substr(line.find('b') + 1, eq));
      const auto v = detail::numbers(line.substr(eq + 1));
      if (v.size() != 4) fail("parameter line without 4 numbers: " + line);
      if (k != prob.parameters + 1) fail("parameter b" + std::to_string(k) + " out of order");
      prob.start1.push_back(v[0]);
      prob.start2.push_back(v[1]);
      prob.certified.push_back(v[2]);
      prob.certified_std_dev.push_back(v[3]);
      ++prob.parameters;
    } else if (line.find("Residual Sum of Squares:") != std::string::npos) {
      prob.certified_rss = std::strtod(detail::after(line, ":").c_str(), nullptr);
    } else if (line.find("Residual Standard Deviation:") != std::string::npos) {
      prob.certified_residual_std_dev = std::strtod(detail::after(line, ":").c_str(), nullptr);
    } else if (line.find("Degrees of Freedom:") != std::string::npos) {
      prob.degrees_of_freedom = std::stoul(detail::after(line, ":"));
    } else if (line.find("Number of Observations:") != std::string::npos) {
      prob.observations = std::stoul(detail::after(line, ":"));
    } else if (detail::starts_with_word(line, "Data:")) {
      // The header's "Data: 1 Response Variable ..." is not the table; the table's is "Data: y ...".
      std::istringstream words(detail::after(line, "Data:"));
      std::string first;
      words >> first;
      in_data = first == "y";
    }
  }
  if (prob.parameters == 0) fail("no parameter lines");
  if (prob.difficulty.empty()) fail("no level of difficulty");
  if (prob.certified_rss == 0) fail("no residual sum of squares");
  if (prob.y.empty()) fail("no data");
  if (prob.y.size() != prob.observations)
    fail(std::to_string(prob.y.size()) + " observations read, the header says " + std::to_string(prob.observations));
  // Not checked against n - P: Rat43.dat says 9 where n - P = 11 (its residual standard
  // deviation, sqrt(RSS / 11), shows 11 is meant). Standard errors use n - P.
  prob.predictors = columns - 1;
  return prob;
}

// The data directory: $TL_NIST_DATA_DIR, else the build's TL_NIST_DATA_DIR, else
// tests/data/nist relative to this header's path as the compiler saw it.
inline std::filesystem::path data_dir() {
  if (const char* env = std::getenv("TL_NIST_DATA_DIR")) return env;
#ifdef TL_NIST_DATA_DIR
  return TL_NIST_DATA_DIR;
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "nist";
#endif
}

inline problem read(const std::string& name) { return read(data_dir() / (name + ".dat")); }

// NIST's log relative error (McCullough 1998): the number of significant digits that
// agree, -log10(|estimate - certified| / |certified|), clamped to [0, 11] (the
// certified values have 11 digits). Absolute error when the certified value is 0.
inline double log_relative_error(double estimate, double certified) {
  constexpr double digits = 11;
  if (!std::isfinite(estimate)) return 0;
  const double error = std::abs(estimate - certified);
  if (error == 0) return digits;
  const double lre = certified != 0 ? -std::log10(error / std::abs(certified)) : -std::log10(error);
  return std::fmin(digits, std::fmax(0.0, lre));
}

}  // namespace tl_test::nist
