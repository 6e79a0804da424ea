// NumPy .npy files holding a float32 or float64 matrix: reads versions 1.0, 2.0 and 3.0,
// writes 1.0. The layout says how the array's axes map to tl::basic_matrix's
// (features, batch):
//   samples_by_features: shape (batch, features), one row per sample: the usual layout
//                        of a data set in NumPy, scikit-learn, PyTorch.
//   features_by_samples: shape (features, batch), one column per sample.
// A 1-D array of n values is n samples of one feature in either layout.
//
// Types: a '<f2' (float16) or '<f4' file loads as float or double (widening is exact); a
// '<f8' file loads only as double, since narrowing would silently round; the error says so. Big-endian,
// Fortran-order, structured and non-float arrays, and more than 2 dimensions are
// rejected with a message naming the file and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tapeless/io/atomic_file.hpp"
#include "tapeless/io/dtype.hpp"  // half_bits_to_float
#include "tapeless/io/failure.hpp"
#include "tapeless/io/host_floats.hpp"
#include "tapeless/io/non_finite.hpp"
#include "tapeless/io/read_file.hpp"
#include "tapeless/nn/matrix.hpp"

namespace tl {

enum class npy_layout { samples_by_features, features_by_samples };

namespace detail {

struct npy_header {
  std::size_t item_size = 0;  // 2 ('<f2'), 4 ('<f4') or 8 ('<f8')
  std::vector<std::size_t> shape;
  std::size_t data_offset = 0;
};

// The header is a Python dict literal, e.g. "{'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }" padded with spaces and ended by '\n'. Only that form is accepted.
class npy_dict_reader {
 public:
  npy_dict_reader(std::string_view text, const std::filesystem::path& file) : text_(text), file_(file) {}

  npy_header parse() {
    npy_header header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    for (;;) {
      skip_spaces();
      if (peek() == '}') break;
      const std::string key = parse_quoted();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        if (seen_descr) fail("'descr' appears twice");
        seen_descr = true;
        if (peek() == '[') fail("structured dtypes are not supported (tapeless reads '<f2', '<f4' and '<f8')");
        const std::string descr = parse_quoted();
        if (descr == "<f2") header.item_size = 2;
        else if (descr == "<f4") header.item_size = 4;
        else if (descr == "<f8") header.item_size = 8;
        else if (descr == ">f4" || descr == ">f8") fail("big-endian data (" + quoted_excerpt(descr) + ") is not supported");
        else fail("dtype " + quoted_excerpt(descr) + " is not supported (tapeless reads '<f2', '<f4' and '<f8')");
      } else if (key == "fortran_order") {
        if (seen_order) fail("'fortran_order' appears twice");
        seen_order = true;
        if (text_.substr(pos_, 5) == "False") pos_ += 5;
        else if (text_.substr(pos_, 4) == "True") fail("the array is in Fortran order; save it in C order (np.ascontiguousarray)");
        else fail("'fortran_order' must be True or False");
      } else if (key == "shape") {
        if (seen_shape) fail("'shape' appears twice");
        seen_shape = true;
        header.shape = parse_tuple();
      } else {
        fail("unknown key " + quoted_excerpt(key));
      }
      skip_spaces();
      if (peek() == ',') ++pos_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;  // '}'
    skip_spaces();
    if (pos_ + 1 != text_.size() || text_[pos_] != '\n') fail("the header must end with spaces and one '\\n'");
    if (!seen_descr || !seen_order || !seen_shape) fail("the header needs 'descr', 'fortran_order' and 'shape'");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw_io_error(file_, "invalid .npy header: " + problem + " (at byte " + std::to_string(pos_) + " of the header)");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_spaces() {
    while (peek() == ' ') ++pos_;
  }
  void expect(char c) {
    skip_spaces();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_quoted() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    const std::string_view content = text_.substr(pos_ + 1, end - pos_ - 1);
    if (content.find('\\') != std::string_view::npos || content.find('\n') != std::string_view::npos) {
      fail("escapes and newlines are not allowed in header strings");
    }
    pos_ = end + 1;
    return std::string(content);
  }
  // "()", "(n,)", "(n, m)", ... as Python writes tuples (a 1-tuple needs its comma).
  std::vector<std::size_t> parse_tuple() {
    std::vector<std::size_t> values;
    if (peek() != '(') fail("'shape' must be a tuple");
    ++pos_;
    bool trailing_comma = false;
    for (;;) {
      skip_spaces();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("'shape' must hold non-negative integers");
      std::size_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (!checked_multiply(value, 10, value) || value > SIZE_MAX - std::size_t(peek() - '0')) fail("a dimension is too large");
        value += std::size_t(peek() - '0');
        ++pos_;
      }
      values.push_back(value);
      skip_spaces();
      trailing_comma = peek() == ',';
      if (trailing_comma) ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in 'shape'");
    }
    ++pos_;
    if (values.size() == 1 && !trailing_comma) fail("a 1-D shape is written (n,)");
    return values;
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  std::size_t pos_ = 0;
};

inline npy_header parse_npy_header(const std::filesystem::path& file, std::span<const std::byte> bytes) {
  static constexpr unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) {
    throw_io_error(file, "is not a .npy file (it does not start with \\x93NUMPY)");
  }
  const auto major = std::to_integer<unsigned>(bytes[6]), minor = std::to_integer<unsigned>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw_io_error(file, ".npy version " + std::to_string(major) + "." + std::to_string(minor) +
                             " is not supported (tapeless reads 1.0, 2.0 and 3.0)");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) throw_io_error(file, "is truncated inside the .npy header length");
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) header_length |= std::to_integer<std::size_t>(bytes[8 + i]) << (8 * i);
  const std::size_t prefix = 8 + length_bytes;
  if (header_length > bytes.size() - prefix) {
    throw_io_error(file, ".npy header length " + std::to_string(header_length) + " runs past the end of the file (" +
                             std::to_string(bytes.size()) + " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix), header_length);
  npy_header header = npy_dict_reader(text, file).parse();
  header.data_offset = prefix + header_length;

  if (header.shape.empty() || header.shape.size() > 2) {
    throw_io_error(file, "the array has " + std::to_string(header.shape.size()) +
                             " dimensions; tapeless reads 1-D and 2-D arrays");
  }
  std::size_t data_bytes = header.item_size;
  for (const std::size_t d : header.shape) {
    if (!checked_multiply(data_bytes, d, data_bytes)) throw_io_error(file, "the shape has more elements than fit in memory");
  }
  const std::size_t available = bytes.size() - header.data_offset;
  if (available < data_bytes) {
    throw_io_error(file, "the data is truncated: the shape needs " + std::to_string(data_bytes) + " bytes, the file has " +
                             std::to_string(available) + " after the header");
  }
  if (available > data_bytes) {
    throw_io_error(file, std::to_string(available - data_bytes) + (available - data_bytes == 1 ? " byte" : " bytes") + " of trailing data after the array");
  }
  return header;
}

// Stored: float, double, or std::uint16_t for float16's bits (widened exactly).
template <class Stored, class T>
void copy_npy_values(const std::byte* data, basic_matrix<T>& m, bool transposed) {
  const std::size_t features = m.features(), batch = m.batch();
  for (std::size_t i = 0; i < m.size(); ++i) {
    Stored value;
    std::memcpy(&value, data + i * sizeof(Stored), sizeof(Stored));
    // Transposed: element i of the (features, batch) array is feature i / batch of sample i % batch.
    const std::size_t target = transposed ? (i % batch) * features + i / batch : i;
    if constexpr (std::is_same_v<Stored, std::uint16_t>) m.data()[target] = static_cast<T>(half_bits_to_float(value));
    else m.data()[target] = static_cast<T>(value);
  }
}

template <class T>
basic_matrix<T> npy_to_matrix(const std::filesystem::path& file, std::span<const std::byte> bytes, npy_layout layout,
                              non_finite_values policy) {
  const npy_header header = parse_npy_header(file, bytes);
  if (header.item_size == 8 && std::is_same_v<T, float>) {
    throw_io_error(file, "holds float64 ('<f8') data; load_npy<float> would round it (load it with load_npy<double>)");
  }
  const bool one_dimensional = header.shape.size() == 1;
  const bool by_samples = one_dimensional || layout == npy_layout::samples_by_features;
  const std::size_t features = one_dimensional ? 1 : by_samples ? header.shape[1] : header.shape[0];
  const std::size_t batch = one_dimensional ? header.shape[0] : by_samples ? header.shape[0] : header.shape[1];
  // The file holds every element (checked above), so this allocation is at most twice its size.
  basic_matrix<T> m(features, batch);
  const std::byte* data = bytes.data() + header.data_offset;
  if (header.item_size == 2) copy_npy_values<std::uint16_t>(data, m, !by_samples);
  else if (header.item_size == 4) copy_npy_values<float>(data, m, !by_samples);
  else copy_npy_values<double>(data, m, !by_samples);
  if (policy == non_finite_values::reject) {
    if (const auto index = first_non_finite<T>(m.values())) {
      throw_io_error(file, "holds a NaN or infinity at element " + std::to_string(*index) + " of the matrix (feature " +
                               std::to_string(*index % features) + ", sample " + std::to_string(*index / features) + ")");
    }
  }
  return m;
}

template <class T>
void save_npy(const std::filesystem::path& file, const basic_matrix<T>& m, npy_layout layout, const write_fault& fault) {
  const bool by_samples = layout == npy_layout::samples_by_features;
  const std::size_t rows = by_samples ? m.batch() : m.features(), columns = by_samples ? m.features() : m.batch();
  std::string header = std::string("{'descr': '") + (std::is_same_v<T, float> ? "<f4" : "<f8") +
                       "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " + std::to_string(columns) + "), }";
  // NumPy pads so the data starts on a 64-byte boundary: magic (6) + version (2) + length (2).
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) throw_io_error(file, "the .npy header is too long for format version 1.0");
  const unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                    static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
  std::vector<T> transposed;
  std::span<const T> values = m.values();
  if (!by_samples) {
    transposed.resize(m.size());
    for (std::size_t s = 0; s < m.batch(); ++s) {
      for (std::size_t f = 0; f < m.features(); ++f) transposed[f * m.batch() + s] = m(f, s);
    }
    values = transposed;
  }
  const std::span<const std::byte> pieces[] = {std::as_bytes(std::span(prefix)),
                                               std::as_bytes(std::span(header.data(), header.size())),
                                               std::as_bytes(values)};
  write_file_atomically(file, pieces, fault);
}

}  // namespace detail

// Loads a float32 or float64 .npy matrix; see the top of this file for layouts and types.
// Throws tl::io_error naming the file and the problem; nothing else is changed.
template <class T>
basic_matrix<T> load_npy(const std::filesystem::path& file, npy_layout layout,
                         non_finite_values policy = non_finite_values::reject) {
  return detail::npy_to_matrix<T>(file, detail::read_file_bytes(file), layout, policy);
}

// Writes a version 1.0 .npy file ('<f4' for float, '<f8' for double) atomically: on
// failure a tl::io_error is thrown and an existing file keeps its previous contents.
template <class T>
void save_npy(const std::filesystem::path& file, const basic_matrix<T>& m, npy_layout layout) {
  detail::save_npy(file, m, layout, {});
}

}  // namespace tl
