// A batch of samples: shape (features, batch), sample-major, i.e. sample s's
// features are contiguous at data()[s * features, (s + 1) * features).
// tl::matrix holds floats; tl::basic_matrix<double> trains in float64.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tapeless/core/errors.hpp"

namespace tl {

template <class T>
class basic_matrix {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tapeless::basic_matrix: the scalar type must be float or double");

 public:
  using value_type = T;

  basic_matrix() = default;
  basic_matrix(std::size_t features, std::size_t batch) : features_(features), batch_(batch), data_(features * batch) {}
  basic_matrix(std::size_t features, std::size_t batch, std::vector<T> data)
      : features_(features), batch_(batch), data_(std::move(data)) {
    check_size();
  }
  basic_matrix(std::size_t features, std::size_t batch, std::span<const T> data)
      : features_(features), batch_(batch), data_(data.begin(), data.end()) {
    check_size();
  }

  std::size_t features() const { return features_; }
  std::size_t batch() const { return batch_; }
  std::size_t size() const { return data_.size(); }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::span<T> values() { return data_; }
  std::span<const T> values() const { return data_; }
  T& operator()(std::size_t feature, std::size_t sample) { return data_[sample * features_ + feature]; }
  T operator()(std::size_t feature, std::size_t sample) const { return data_[sample * features_ + feature]; }

  // The same batch in another precision: m.cast<double>() (PyTorch's .double()).
  template <class U>
  basic_matrix<U> cast() const {
    std::vector<U> values(data_.begin(), data_.end());
    return basic_matrix<U>(features_, batch_, std::move(values));
  }

  friend bool operator==(const basic_matrix&, const basic_matrix&) = default;

 private:
  void check_size() const {
    if (data_.size() != features_ * batch_) {
      throw shape_error("tapeless::matrix: features (" + std::to_string(features_) + ") x batch (" +
                        std::to_string(batch_) + ") = " + std::to_string(features_ * batch_) +
                        " values expected, the data has " + std::to_string(data_.size()));
    }
  }

  std::size_t features_ = 0;
  std::size_t batch_ = 0;
  std::vector<T> data_;
};

using matrix = basic_matrix<float>;

}  // namespace tl
