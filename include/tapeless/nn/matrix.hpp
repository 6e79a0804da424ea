// A batch of samples: shape (features, batch), sample-major, i.e. sample s's
// features are contiguous at data()[s * features, (s + 1) * features).
// tl::matrix holds floats; tl::basic_matrix<double> trains in float64.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tapeless/core/errors.hpp"

namespace tl {

namespace detail {
// A mini-batch's samples must lie in the batch (host and device matrices alike).
// [first, first + count) within `size` things (written so that first + count cannot
// overflow); else a shape_error: "<where>: samples [3, 3 + 3) run past the batch of 5".
inline void check_sample_range(const char* where, std::size_t first, std::size_t count, std::size_t size,
                               const char* things = "samples", const char* past = "the batch of") {
  if (first > size || count > size - first) {
    throw shape_error(std::string("tapeless::") + where + ": " + things + " [" + std::to_string(first) + ", " +
                      std::to_string(first) + " + " + std::to_string(count) + ") run past " + past + " " +
                      std::to_string(size));
  }
}
inline void check_sample_indices(const char* where, std::span<const std::size_t> indices, std::size_t batch) {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= batch) {
      throw shape_error(std::string("tapeless::") + where + ": index " + std::to_string(i) + " is sample " +
                        std::to_string(indices[i]) + ", past the batch of " + std::to_string(batch));
    }
  }
}
}  // namespace detail

template <class T>
class basic_matrix {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tapeless::basic_matrix: the scalar type must be float or double");

 public:
  using value_type = T;

  basic_matrix() = default;
  basic_matrix(std::size_t features, std::size_t batch)
      : features_(features), batch_(batch), data_(zeros(features, batch)) {}
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

  // A copy of samples [first, first + count): a mini-batch of consecutive samples.
  basic_matrix samples(std::size_t first, std::size_t count) const {
    detail::check_sample_range("matrix::samples", first, count, batch_);
    return basic_matrix(features_, count, std::span<const T>(data_).subspan(first * features_, count * features_));
  }
  // A copy of the samples at `indices`, in that order (a shuffled mini-batch: PyTorch's
  // x[idx]); an index past the batch is a shape_error naming it.
  basic_matrix samples(std::span<const std::size_t> indices) const {
    detail::check_sample_indices("matrix::samples", indices, batch_);
    basic_matrix out(features_, indices.size());
    for (std::size_t i = 0; i < indices.size(); ++i)
      std::copy_n(data_.begin() + std::ptrdiff_t(indices[i] * features_), features_,
                  out.data_.begin() + std::ptrdiff_t(i * features_));
    return out;
  }

  friend bool operator==(const basic_matrix&, const basic_matrix&) = default;

 private:
  // features x batch, refused where it wraps around (2 x 2^63 would be 0 values, a
  // matrix that passes every batch check and then reads memory it does not have).
  static std::size_t value_count(std::size_t features, std::size_t batch) {
    if (features != 0 && batch > std::numeric_limits<std::size_t>::max() / features)
      throw shape_error("tapeless::matrix: features (" + std::to_string(features) + ") x batch (" +
                        std::to_string(batch) + ") values do not fit in a size_t");
    return features * batch;
  }
  static std::vector<T> zeros(std::size_t features, std::size_t batch) {
    const std::size_t count = value_count(features, batch);
    try {
      return std::vector<T>(count);
    } catch (const std::bad_alloc&) {
      char gigabytes[32];
      std::snprintf(gigabytes, sizeof gigabytes, "%.1f GB", double(count) * sizeof(T) / 1e9);
      throw memory_error("tapeless::matrix: features (" + std::to_string(features) + ") x batch (" +
                         std::to_string(batch) + ") = " + std::to_string(count) + " values (" + gigabytes +
                         ") could not be allocated");
    } catch (const std::length_error&) {
      throw memory_error("tapeless::matrix: features (" + std::to_string(features) + ") x batch (" +
                         std::to_string(batch) + ") = " + std::to_string(count) +
                         " values are more than a vector holds");
    }
  }
  void check_size() const {
    if (data_.size() != value_count(features_, batch_)) {
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
