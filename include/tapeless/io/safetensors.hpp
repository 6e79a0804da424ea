// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
//    "__metadata__": {"key": "value"}}
// then the tensors' little-endian bytes; offsets count from the end of the header.
// A file may hold tensors of the spec's dtypes of whole bytes (a PyTorch state dict
// keeps I64 counters beside its weights): they load, and are listed and skipped like any
// other; values are copied out of F32, F16 and BF16 tensors (into float or double) and
// F64 ones (into double): every widening is exact (io/dtype.hpp). The sub-byte F4 and
// F6 dtypes are refused.
//
// Loading checks everything before anything is handed out, as the spec asks: the data
// regions must cover the buffer exactly (no gaps, overlaps or trailing bytes), sizes must
// match shapes, names must be unique. copy_to/values then check the caller's expected
// dtype, shape and finiteness, so a checkpoint loader can read every tensor into
// temporaries, and only then commit, leaving the model untouched by a bad file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tapeless/io/atomic_file.hpp"
#include "tapeless/io/dtype.hpp"
#include "tapeless/io/failure.hpp"
#include "tapeless/io/host_floats.hpp"
#include "tapeless/io/json.hpp"
#include "tapeless/io/non_finite.hpp"
#include "tapeless/io/read_file.hpp"

namespace tl {

// A tensor to write: name, type, shape (row-major, as in NumPy/PyTorch) and its bytes.
// The float/double constructors take the values; save_safetensors checks that their
// count matches the shape. A tl::basic_matrix (features, batch) is, row-major, the shape
// {batch, features}. The view borrows the values; they must outlive the save call.
struct tensor_view {
  std::string name;
  dtype type;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;

  tensor_view(std::string name_, dtype type_, std::vector<std::size_t> shape_, std::span<const std::byte> bytes_)
      : name(std::move(name_)), type(type_), shape(std::move(shape_)), bytes(bytes_) {}
  tensor_view(std::string name_, std::span<const float> values, std::vector<std::size_t> shape_)
      : tensor_view(std::move(name_), dtype::f32, std::move(shape_), std::as_bytes(values)) {}
  tensor_view(std::string name_, std::span<const double> values, std::vector<std::size_t> shape_)
      : tensor_view(std::move(name_), dtype::f64, std::move(shape_), std::as_bytes(values)) {}
};

// A tensor in a loaded file; `bytes` points into the safetensors_file that holds it.
struct stored_tensor {
  dtype type;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;
  std::size_t elements() const { return bytes.size() / dtype_size(type); }
};

namespace detail {

inline constexpr std::size_t safetensors_header_limit = 100'000'000;  // the reference implementation's cap

inline std::string shape_text(std::span<const std::size_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The product of the dimensions times `element_size`, or false when it overflows.
inline bool byte_count(std::span<const std::size_t> shape, std::size_t element_size, std::size_t& bytes) {
  bytes = element_size;
  for (const std::size_t d : shape) {
    if (!checked_multiply(bytes, d, bytes)) return false;
  }
  return true;
}

inline void save_safetensors(const std::filesystem::path& file, std::span<const tensor_view> tensors,
                             const std::map<std::string, std::string>& metadata, const write_fault& fault) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!json::valid_utf8(key) || !json::valid_utf8(value)) {
        throw_io_error(file, "metadata entry " + quoted_excerpt(key) + " is not valid UTF-8");
      }
      header += first ? "" : ",";
      first = false;
      json::append_string(header, key);
      header += ':';
      json::append_string(header, value);
    }
    header += '}';
  }
  std::set<std::string_view> names;
  std::vector<std::span<const std::byte>> pieces(2);  // the length and the header come first
  std::size_t offset = 0;
  for (const tensor_view& tensor : tensors) {
    const std::string name = "tensor " + quoted_excerpt(tensor.name);
    if (tensor.name == "__metadata__") throw_io_error(file, "'__metadata__' is reserved and cannot name a tensor");
    if (!json::valid_utf8(tensor.name)) throw_io_error(file, name + ": the name is not valid UTF-8");
    if (!names.insert(tensor.name).second) throw_io_error(file, "two tensors are named " + quoted_excerpt(tensor.name));
    std::size_t bytes = 0;
    const bool fits = byte_count(tensor.shape, dtype_size(tensor.type), bytes);
    if (!fits || bytes != tensor.bytes.size()) {
      throw_shape_error(file, name + ": shape " + shape_text(tensor.shape) + " of " +
                                  std::string(dtype_name(tensor.type)) + " needs " +
                                  (fits ? std::to_string(bytes) + " bytes" : "more bytes than fit in memory") +
                                  ", the data has " + std::to_string(tensor.bytes.size()));
    }
    header += header.size() > 1 ? "," : "";
    json::append_string(header, tensor.name);
    header += ":{\"dtype\":\"" + std::string(dtype_name(tensor.type)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < tensor.shape.size(); ++i) header += (i ? "," : "") + std::to_string(tensor.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
    pieces.push_back(tensor.bytes);
  }
  header += '}';
  // Spaces after the JSON (allowed) align the data to 8 bytes, as the reference writer does,
  // so a reader that maps the file can use the doubles in place.
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t length = header.size();
  pieces[0] = std::as_bytes(std::span(&length, 1));
  pieces[1] = std::as_bytes(std::span(header.data(), header.size()));
  write_file_atomically(file, pieces, fault);
}

}  // namespace detail

// Writes the tensors, in the given order, and the metadata to `file` atomically: on
// failure one tl::io_error (or tl::shape_error for a view whose bytes do not match its
// shape) is thrown and an existing file keeps its previous contents.
inline void save_safetensors(const std::filesystem::path& file, std::span<const tensor_view> tensors,
                             const std::map<std::string, std::string>& metadata = {}) {
  detail::save_safetensors(file, tensors, metadata, {});
}

// A loaded safetensors file: owns the bytes, which the stored tensors point into (so it
// can be moved, not copied).
class safetensors_file {
 public:
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;
  safetensors_file(safetensors_file&&) = default;
  safetensors_file& operator=(safetensors_file&&) = default;

  // Parses and checks `bytes`; `file` names them in messages.
  static safetensors_file from_bytes(const std::filesystem::path& file, std::vector<std::byte> bytes);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // in the header's order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

  const stored_tensor& at(std::string_view name) const {
    const auto found = tensors_.find(name);
    if (found == tensors_.end()) {
      std::string list;
      for (std::size_t i = 0; i < names_.size() && i < 8; ++i) list += (i ? ", " : "") + detail::quoted_excerpt(names_[i]);
      if (names_.size() > 8) list += ", ...";
      detail::throw_io_error(path_, "has no tensor " + detail::quoted_excerpt(name) + " (it holds " +
                                        std::to_string(names_.size()) + (names_.empty() ? "" : ": " + list) + ")");
    }
    return found->second;
  }

  // Copies tensor `name` into `out` after checking that T holds its dtype's values
  // exactly (F32, F16 or BF16 for float, and F64 too for double: F64 into float would
  // round, and an integer or F8 type is an io_error naming it),
  // that its shape is `expected_shape` and that its values are finite (unless allowed).
  // On failure `out` is unchanged.
  template <class T>
  void copy_to(std::string_view name, std::span<T> out, const std::vector<std::size_t>& expected_shape,
               non_finite_values policy = non_finite_values::reject) const {
    copy_values(checked<T>(name, out.size(), expected_shape, policy), out.data());
  }

  // The same checks, into a new vector.
  template <class T>
  std::vector<T> values(std::string_view name, const std::vector<std::size_t>& expected_shape,
                        non_finite_values policy = non_finite_values::reject) const {
    std::size_t bytes = 0;
    if (!detail::byte_count(expected_shape, sizeof(T), bytes)) bytes = 0;  // checked() reports the overflow
    std::vector<T> out;
    const stored_tensor& tensor = checked<T>(name, bytes / sizeof(T), expected_shape, policy);
    out.resize(tensor.elements());
    copy_values(tensor, out.data());
    return out;
  }

 private:
  safetensors_file() = default;
  void parse();
  void add_metadata(const detail::json::value& entry);
  void add_tensor(const std::string& name, const detail::json::value& entry, std::size_t data_start);
  void check_regions_tile_the_data(std::size_t data_start) const;

  template <class T>
  const stored_tensor& checked(std::string_view name, std::size_t out_size, const std::vector<std::size_t>& shape,
                               non_finite_values policy) const {
    const std::string label = "tensor " + detail::quoted_excerpt(name);
    std::size_t bytes = 0;
    const bool fits = detail::byte_count(shape, sizeof(T), bytes);
    if (!fits || bytes / sizeof(T) != out_size) {
      detail::throw_shape_error(path_, label + ": the destination holds " + std::to_string(out_size) +
                                           " values, the expected shape " + detail::shape_text(shape) + " has " +
                                           (fits ? std::to_string(bytes / sizeof(T)) : "more than fit in memory"));
    }
    const stored_tensor& tensor = at(name);
    if (!detail::widens_exactly_into<T>(tensor.type)) {
      detail::throw_io_error(path_, label + " is stored as " + std::string(dtype_name(tensor.type)) + ", expected " +
                                        std::string(detail::readable_dtypes<T>()));
    }
    if (tensor.shape != shape) {
      detail::throw_shape_error(path_, label + " has shape " + detail::shape_text(tensor.shape) + ", expected " +
                                           detail::shape_text(shape));
    }
    if (policy == non_finite_values::reject) {
      if (const auto index = detail::first_non_finite_stored(tensor.type, tensor.bytes)) {
        detail::throw_io_error(path_, label + " holds a NaN or infinity at index " + std::to_string(*index));
      }
    }
    return tensor;
  }

  // The checked tensor's values into out, widened where they are narrower than T.
  template <class T>
  static void copy_values(const stored_tensor& tensor, T* out) {
    detail::widen_values(tensor.type, tensor.bytes, out);
  }

  std::filesystem::path path_;
  std::vector<std::byte> buffer_;
  std::vector<std::string> names_;
  std::map<std::string, stored_tensor, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

inline safetensors_file load_safetensors(const std::filesystem::path& file) {
  return safetensors_file::from_bytes(file, detail::read_file_bytes(file));
}


inline safetensors_file safetensors_file::from_bytes(const std::filesystem::path& file, std::vector<std::byte> bytes) {
  safetensors_file result;
  result.path_ = file;
  result.buffer_ = std::move(bytes);
  result.parse();
  return result;
}

inline void safetensors_file::parse() {
  if (buffer_.size() < 8) {
    detail::throw_io_error(path_, "is " + std::to_string(buffer_.size()) +
                                      " bytes long; a safetensors file starts with an 8-byte header length");
  }
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, buffer_.data(), 8);
  // Both checks come before the header is looked at: a corrupt length must not make us
  // read past the buffer or take gigabytes for a "header".
  if (header_length > detail::safetensors_header_limit) {
    detail::throw_io_error(path_, "header length " + std::to_string(header_length) + " exceeds the limit of " +
                                      std::to_string(detail::safetensors_header_limit) +
                                      " bytes (a corrupt file, or not a safetensors file)");
  }
  if (header_length > buffer_.size() - 8) {
    detail::throw_io_error(path_, "header length " + std::to_string(header_length) + " runs past the end of the file (" +
                                      std::to_string(buffer_.size()) + " bytes)");
  }
  const std::string_view header(reinterpret_cast<const char*>(buffer_.data() + 8), header_length);
  if (header.empty() || header.front() != '{') detail::throw_io_error(path_, "the header does not start with '{'");
  const detail::json::value root = detail::json::reader(header, path_, "the header").parse_document();
  const std::size_t data_start = 8 + header_length;
  for (std::size_t i = 0; i < root.keys.size(); ++i) {
    if (root.keys[i] == "__metadata__") add_metadata(root.items[i]);
    else add_tensor(root.keys[i], root.items[i], data_start);
  }
  check_regions_tile_the_data(data_start);
}

inline void safetensors_file::add_metadata(const detail::json::value& entry) {
  using kind = detail::json::value::kind;
  if (entry.type != kind::object) {
    detail::throw_io_error(path_, std::string("'__metadata__' must be an object, found ") + detail::json::kind_name(entry.type));
  }
  for (std::size_t i = 0; i < entry.keys.size(); ++i) {
    if (entry.items[i].type != kind::string) {
      detail::throw_io_error(path_, "metadata value " + detail::quoted_excerpt(entry.keys[i]) + " must be a string, found " +
                                        detail::json::kind_name(entry.items[i].type));
    }
    metadata_[entry.keys[i]] = entry.items[i].text;
  }
}

inline void safetensors_file::add_tensor(const std::string& name, const detail::json::value& entry,
                                         std::size_t data_start) {
  using kind = detail::json::value::kind;
  const std::string label = "tensor " + detail::quoted_excerpt(name);
  const auto fail = [&](const std::string& problem) { detail::throw_io_error(path_, label + ": " + problem); };
  if (entry.type != kind::object) fail(std::string("expected an object, found ") + detail::json::kind_name(entry.type));
  const detail::json::value *dtype_entry = nullptr, *shape_entry = nullptr, *offsets_entry = nullptr;
  for (std::size_t i = 0; i < entry.keys.size(); ++i) {
    if (entry.keys[i] == "dtype") dtype_entry = &entry.items[i];
    else if (entry.keys[i] == "shape") shape_entry = &entry.items[i];
    else if (entry.keys[i] == "data_offsets") offsets_entry = &entry.items[i];
    else fail("unknown key " + detail::quoted_excerpt(entry.keys[i]));
  }
  if (!dtype_entry || !shape_entry || !offsets_entry) fail("needs 'dtype', 'shape' and 'data_offsets'");

  if (dtype_entry->type != kind::string) fail("'dtype' must be a string");
  const auto known = std::find_if(std::begin(detail::dtype_table), std::end(detail::dtype_table),
                                  [&](const detail::dtype_entry& e) { return e.name == dtype_entry->text; });
  if (known == std::end(detail::dtype_table)) {
    std::string names;
    for (const detail::dtype_entry& e : detail::dtype_table)
      names += (names.empty() ? "" : ", ") + std::string(e.name);
    fail("dtype " + detail::quoted_excerpt(dtype_entry->text) +
         " is not supported (the safetensors dtypes tapeless reads: " + names +
         "; not the sub-byte F4, F6_E2M3, F6_E3M2)");
  }
  const dtype type = known->type;

  if (shape_entry->type != kind::array) fail("'shape' must be an array");
  std::vector<std::size_t> shape;
  for (const auto& dimension : shape_entry->items) {
    if (dimension.type != kind::integer) fail("'shape' must hold non-negative integers");
    shape.push_back(static_cast<std::size_t>(dimension.integer));
  }
  std::size_t bytes = 0;
  if (!detail::byte_count(shape, dtype_size(type), bytes)) fail("shape " + detail::shape_text(shape) + " has more elements than fit in memory");

  if (offsets_entry->type != kind::array || offsets_entry->items.size() != 2 ||
      offsets_entry->items[0].type != kind::integer || offsets_entry->items[1].type != kind::integer) {
    fail("'data_offsets' must be [begin, end]");
  }
  const std::uint64_t begin = offsets_entry->items[0].integer, end = offsets_entry->items[1].integer;
  const std::string offsets = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  const std::size_t data_size = buffer_.size() - data_start;
  if (begin > end) fail(offsets + " end before they begin");
  if (end > data_size) fail(offsets + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
  if (end - begin != bytes) {
    fail(offsets + " hold " + std::to_string(end - begin) + " bytes, shape " + detail::shape_text(shape) + " of " +
         std::string(dtype_name(type)) + " needs " + std::to_string(bytes));
  }
  // Duplicate names were rejected by the JSON reader.
  tensors_.emplace(name, stored_tensor{type, std::move(shape), std::span(buffer_.data() + data_start + begin, bytes)});
  names_.push_back(name);
}

// The spec forbids holes and overlaps, so that a file cannot hide other data (a polyglot).
inline void safetensors_file::check_regions_tile_the_data(std::size_t data_start) const {
  struct region {
    std::size_t begin, end;
    const std::string* name;
  };
  std::vector<region> regions;
  for (const auto& [name, tensor] : tensors_) {
    const auto begin = static_cast<std::size_t>(tensor.bytes.data() - (buffer_.data() + data_start));
    regions.push_back({begin, begin + tensor.bytes.size(), &name});
  }
  std::sort(regions.begin(), regions.end(),
            [](const region& a, const region& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::size_t covered = 0;
  const std::string* previous = nullptr;
  for (const region& r : regions) {
    const std::string range = " (bytes [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + "))";
    if (r.begin < covered) {
      detail::throw_io_error(path_, "tensor " + detail::quoted_excerpt(*r.name) + range + " overlaps tensor " +
                                        detail::quoted_excerpt(*previous));
    }
    if (r.begin > covered) {
      detail::throw_io_error(path_, "data bytes [" + std::to_string(covered) + ", " + std::to_string(r.begin) +
                                        ") belong to no tensor (the format allows no gaps)");
    }
    covered = r.end;
    previous = r.name;
  }
  const std::size_t data_size = buffer_.size() - data_start;
  if (covered != data_size) {
    detail::throw_io_error(path_, std::to_string(data_size - covered) + (data_size - covered == 1 ? " byte" : " bytes") + " of trailing data after the last tensor");
  }
}

}  // namespace tl
