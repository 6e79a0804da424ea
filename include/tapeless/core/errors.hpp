// Exceptions that name the cause. Nothing the caller owns is changed when one is thrown.
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tl {

// A run-time size does not match what the model or another argument requires.
struct shape_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A loss or gradient is NaN or infinite; the step that produced it was not applied.
// Thrown by fit, it carries the losses of the steps that were applied before it.
struct numeric_error : std::runtime_error {
  using std::runtime_error::runtime_error;
  numeric_error(const std::string& what, std::vector<double> history)
      : std::runtime_error(what), loss_history(std::move(history)) {}
  std::vector<double> loss_history;  // from fit: one loss per step applied
};

// A file could not be read or written, or its contents are not what was expected.
// The message names the file and the problem; nothing the caller owns was changed.
struct io_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Host memory for what was asked could not be allocated. A std::bad_alloc, so that
// handlers for it still catch it, whose message says what was asked and how much.
class memory_error : public std::bad_alloc {
 public:
  explicit memory_error(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

namespace detail {
inline void require_size(const char* where, const char* what, std::size_t expected, std::size_t actual) {
  if (expected != actual) {
    throw shape_error(std::string("tapeless::") + where + ": " + what + " must be " + std::to_string(expected) +
                      ", got " + std::to_string(actual));
  }
}
}  // namespace detail

}  // namespace tl
