// A batch of samples: shape (features, batch), sample-major, i.e. sample s's
// features are contiguous at data()[s * features, (s + 1) * features).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "tapeless/core/errors.hpp"

namespace tl {

class matrix {
 public:
  matrix() = default;
  matrix(std::size_t features, std::size_t batch) : features_(features), batch_(batch), data_(features * batch) {}
  matrix(std::size_t features, std::size_t batch, std::vector<float> data)
      : features_(features), batch_(batch), data_(std::move(data)) {
    check_size();
  }
  matrix(std::size_t features, std::size_t batch, std::span<const float> data)
      : features_(features), batch_(batch), data_(data.begin(), data.end()) {
    check_size();
  }

  std::size_t features() const { return features_; }
  std::size_t batch() const { return batch_; }
  std::size_t size() const { return data_.size(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> values() { return data_; }
  std::span<const float> values() const { return data_; }
  float& operator()(std::size_t feature, std::size_t sample) { return data_[sample * features_ + feature]; }
  float operator()(std::size_t feature, std::size_t sample) const { return data_[sample * features_ + feature]; }

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
  std::vector<float> data_;
};

}  // namespace tl
