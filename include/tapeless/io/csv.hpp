// CSV files of numbers with a header row of column names, e.g.
//   x1,x2,y
//   0.5,1,-2.25
// Fields may be quoted as in RFC 4180 ("a,b" and "say ""hi""", line breaks inside quotes);
// lines end in \n or \r\n; a UTF-8 byte order mark is skipped. Numbers are read with
// std::from_chars (locale-independent) and the whole field must be a number: no spaces,
// no empty fields, no magnitude outside T's range (that includes underflow to zero, as
// from_chars reports it), NaN and infinities only when allowed. Every problem is one
// tl::io_error naming the file, the line, the column number and the column's name.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "tapeless/io/atomic_file.hpp"
#include "tapeless/io/failure.hpp"
#include "tapeless/io/non_finite.hpp"
#include "tapeless/io/read_file.hpp"
#include "tapeless/nn/matrix.hpp"

namespace tl {

struct csv_options {
  char delimiter = ',';
  non_finite_values non_finite = non_finite_values::reject;
};

// A table of numbers: row r, column c is values[r * columns.size() + c].
template <class T>
struct csv_table {
  std::vector<std::string> columns;
  std::size_t rows = 0;
  std::vector<T> values;

  T operator()(std::size_t row, std::size_t column) const { return values[row * columns.size() + column]; }
};

// Inputs and targets of a data set as batches: (input columns, rows) and (target columns, rows).
template <class T>
struct csv_xy {
  basic_matrix<T> inputs;
  basic_matrix<T> targets;
};

namespace detail {

// Splits CSV text into records of fields, counting physical lines for messages.
class csv_reader {
 public:
  csv_reader(std::string_view text, const std::filesystem::path& file, char delimiter)
      : text_(text), file_(file), delimiter_(delimiter) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  }

  // Reads the next record; false at the end of the text (blank lines may end a file).
  bool next(std::vector<std::string>& fields, std::size_t& line) {
    if (text_.find_first_not_of("\r\n", pos_) == std::string_view::npos) return false;
    line = line_;
    if (text_[pos_] == '\n' || text_.substr(pos_, 2) == "\r\n") {
      throw_io_error(file_, "line " + std::to_string(line_) + " is empty");
    }
    fields.clear();
    for (;;) {
      const bool quoted = pos_ < text_.size() && text_[pos_] == '"';
      fields.push_back(quoted ? quoted_field() : plain_field());
      if (pos_ < text_.size() && text_[pos_] == delimiter_) {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size()) pos_ += text_[pos_] == '\r' ? 2 : 1;  // "\r\n" or "\n", checked by the field readers
      ++line_;
      return true;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw_io_error(file_, "line " + std::to_string(line_) + ": " + problem);
  }
  bool at_record_end() const {
    return pos_ == text_.size() || text_[pos_] == '\n' || text_.substr(pos_, 2) == "\r\n";
  }

  std::string plain_field() {
    const std::size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != delimiter_ && text_[pos_] != '\n' && text_.substr(pos_, 2) != "\r\n") {
      if (text_[pos_] == '"') fail("a quote inside an unquoted field (quote the whole field)");
      // A lone \r (old Mac line endings) would join every line into one header of
      // odd names and no rows: refused, not read.
      if (text_[pos_] == '\r') fail("a carriage return without a line feed (lines must end in \\n or \\r\\n)");
      ++pos_;
    }
    return std::string(text_.substr(begin, pos_ - begin));
  }

  std::string quoted_field() {
    const std::size_t opened_on = line_;
    std::string out;
    ++pos_;
    for (;;) {
      if (pos_ == text_.size()) {
        throw_io_error(file_, "line " + std::to_string(opened_on) + ": a quoted field is never closed");
      }
      const char c = text_[pos_++];
      if (c == '"') {
        if (pos_ < text_.size() && text_[pos_] == '"') {
          out += '"';
          ++pos_;
          continue;
        }
        break;
      }
      if (c == '\n') ++line_;
      out += c;
    }
    if (!at_record_end() && text_[pos_] != delimiter_) fail("unexpected text after a closing quote");
    return out;
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  char delimiter_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

// The first name that occurs twice (a set: files may have very many columns).
inline std::optional<std::string> first_repeated(const std::vector<std::string>& names) {
  std::unordered_set<std::string_view> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) return name;
  }
  return std::nullopt;
}

template <class T>
T parse_csv_number(const std::filesystem::path& file, std::string_view field, std::size_t line, std::size_t column,
                   const std::string& column_name, non_finite_values policy) {
  const auto fail = [&](const std::string& problem) {
    throw_io_error(file, "line " + std::to_string(line) + ", column " + std::to_string(column + 1) + " (" +
                             quoted_excerpt(column_name) + "): " + problem);
  };
  if (field.empty()) fail("empty field");
  std::string_view digits = field;
  if (digits.front() == '+' && digits.size() > 1 && digits[1] != '-') digits.remove_prefix(1);  // from_chars rejects '+'
  T value{};
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error == std::errc::result_out_of_range) {
    fail(quoted_excerpt(field) + " is out of range for " + (std::is_same_v<T, float> ? "float" : "double"));
  }
  if (error != std::errc{} || end != digits.data() + digits.size()) fail(quoted_excerpt(field) + " is not a number");
  if (policy == non_finite_values::reject && !std::isfinite(value)) {
    fail(quoted_excerpt(field) + " is not finite (pass non_finite_values::allow to accept it)");
  }
  return value;
}

// Reads the columns named in `wanted` (all columns when it is empty), in that order.
template <class T>
csv_table<T> parse_csv(const std::filesystem::path& file, std::string_view text, const csv_options& options,
                       const std::vector<std::string>& wanted) {
  csv_reader reader(text, file, options.delimiter);
  std::vector<std::string> header, fields;
  std::size_t line = 0;
  if (!reader.next(header, line)) throw_io_error(file, "is empty (a header row of column names is needed)");
  if (const auto twice = first_repeated(header)) {
    throw_io_error(file, "line 1: column name " + quoted_excerpt(*twice) + " appears twice");
  }
  std::vector<std::size_t> selected;
  for (const std::string& name : wanted) {
    const auto found = std::find(header.begin(), header.end(), name);
    if (found == header.end()) {
      std::string list;
      for (std::size_t i = 0; i < header.size() && i < 12; ++i) list += (i ? ", " : "") + quoted_excerpt(header[i]);
      throw_io_error(file, "has no column " + quoted_excerpt(name) + " (its columns: " + list +
                               (header.size() > 12 ? ", ...)" : ")"));
    }
    selected.push_back(static_cast<std::size_t>(found - header.begin()));
  }
  if (wanted.empty()) {
    for (std::size_t i = 0; i < header.size(); ++i) selected.push_back(i);
  }
  csv_table<T> table;
  for (const std::size_t column : selected) table.columns.push_back(header[column]);
  while (reader.next(fields, line)) {
    if (fields.size() != header.size()) {
      throw_io_error(file, "line " + std::to_string(line) + " has " + std::to_string(fields.size()) +
                               " fields, the header has " + std::to_string(header.size()) + " columns");
    }
    for (const std::size_t column : selected) {
      table.values.push_back(parse_csv_number<T>(file, fields[column], line, column, header[column], options.non_finite));
    }
    ++table.rows;
  }
  return table;
}

inline void append_csv_field(std::string& out, std::string_view field, char delimiter) {
  if (!field.empty() && field.find_first_of(std::string{'"', '\n', '\r', delimiter}) == std::string_view::npos) {
    out += field;
    return;
  }
  out += '"';  // empty names are quoted too, so a one-column header is never an empty line
  for (const char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  out += '"';
}

template <class T>
void save_csv(const std::filesystem::path& file, const csv_table<T>& table, char delimiter, const write_fault& fault) {
  if (delimiter == '"' || delimiter == '\n' || delimiter == '\r') throw_io_error(file, "the delimiter cannot be a quote or a line break");
  if (table.columns.empty()) throw_io_error(file, "a CSV table needs at least one column");
  if (const auto twice = first_repeated(table.columns)) {
    throw_io_error(file, "column name " + quoted_excerpt(*twice) + " appears twice");
  }
  std::size_t cells = 0;
  if (!checked_multiply(table.rows, table.columns.size(), cells) || cells != table.values.size()) {
    throw_shape_error(file, std::to_string(table.rows) + " rows of " + std::to_string(table.columns.size()) +
                                " columns need " + std::to_string(cells) + " values, the table has " +
                                std::to_string(table.values.size()));
  }
  std::string text;
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    if (c) text += delimiter;
    append_csv_field(text, table.columns[c], delimiter);
  }
  text += '\n';
  char number[64];
  for (std::size_t i = 0; i < table.values.size(); ++i) {
    // The shortest text that reads back as the same value.
    const auto written = std::to_chars(number, number + sizeof number, table.values[i]);
    text.append(number, written.ptr);
    text += (i + 1) % table.columns.size() == 0 ? '\n' : delimiter;
  }
  const std::span<const std::byte> pieces[] = {std::as_bytes(std::span(text.data(), text.size()))};
  write_file_atomically(file, pieces, fault);
}

}  // namespace detail

template <class T>
csv_table<T> load_csv(const std::filesystem::path& file, const csv_options& options = {}) {
  const std::vector<std::byte> bytes = detail::read_file_bytes(file);
  return detail::parse_csv<T>(file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), options, {});
}

// Reads the named input and target columns as batches: inputs is (input_columns.size(),
// rows), targets is (target_columns.size(), rows); sample s is row s. Other columns need
// not be numbers. A missing column is a tl::io_error listing the file's columns.
template <class T>
csv_xy<T> load_csv_xy(const std::filesystem::path& file, const std::vector<std::string>& input_columns,
                      const std::vector<std::string>& target_columns, const csv_options& options = {}) {
  if (input_columns.empty() || target_columns.empty()) {
    detail::throw_shape_error(file, "load_csv_xy needs at least one input column and one target column");
  }
  std::vector<std::string> wanted = input_columns;
  wanted.insert(wanted.end(), target_columns.begin(), target_columns.end());
  const std::vector<std::byte> bytes = detail::read_file_bytes(file);
  const csv_table<T> table =
      detail::parse_csv<T>(file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), options, wanted);
  csv_xy<T> result{basic_matrix<T>(input_columns.size(), table.rows), basic_matrix<T>(target_columns.size(), table.rows)};
  for (std::size_t r = 0; r < table.rows; ++r) {
    const T* row = table.values.data() + r * wanted.size();
    std::copy(row, row + input_columns.size(), result.inputs.data() + r * input_columns.size());
    std::copy(row + input_columns.size(), row + wanted.size(), result.targets.data() + r * target_columns.size());
  }
  return result;
}

// Writes the table atomically; numbers in their shortest exact form, so loading the file
// gives back the same values bit for bit (NaN and infinities are written as nan and inf).
template <class T>
void save_csv(const std::filesystem::path& file, const csv_table<T>& table, char delimiter = ',') {
  detail::save_csv(file, table, delimiter, {});
}

// One row per sample of `samples`, one column per feature, named by `columns`.
template <class T>
void save_csv(const std::filesystem::path& file, const std::vector<std::string>& columns, const basic_matrix<T>& samples,
              char delimiter = ',') {
  if (columns.size() != samples.features()) {
    detail::throw_shape_error(file, std::to_string(columns.size()) + " column names for " +
                                        std::to_string(samples.features()) + " features");
  }
  const std::span<const T> values = samples.values();
  detail::save_csv(file, csv_table<T>{columns, samples.batch(), std::vector<T>(values.begin(), values.end())}, delimiter, {});
}

}  // namespace tl
