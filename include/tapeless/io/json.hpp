// The subset of JSON the safetensors header uses, read and written strictly: objects,
// arrays, strings (all escapes, \uXXXX with surrogate pairs, UTF-8 checked) and
// non-negative integers up to 2^64 - 1. Floats, negative numbers, true, false and null
// never occur in a valid header and are rejected with a message saying so; so are
// duplicate keys (the spec forbids two tensors with one name) and nesting deeper than
// any header needs (a fuzzed "[[[[..." must not exhaust the stack).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tapeless/io/failure.hpp"

namespace tl::detail::json {

struct value {
  enum class kind { object, array, string, integer };
  kind type = kind::object;
  std::string text;               // string
  std::uint64_t integer = 0;      // integer
  std::vector<std::string> keys;  // object: keys[i] names items[i], in file order
  std::vector<value> items;       // object members or array elements
};

inline const char* kind_name(value::kind k) {
  switch (k) {
    case value::kind::object: return "an object";
    case value::kind::array: return "an array";
    case value::kind::string: return "a string";
    case value::kind::integer: return "an integer";
  }
  return "?";
}

inline bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

inline void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
}

class reader {
 public:
  // `what` names the text in messages ("the header"); errors are tl::io_error naming `file`.
  reader(std::string_view text, const std::filesystem::path& file, std::string what)
      : text_(text), file_(file), what_(std::move(what)) {}

  // The whole text is one value, optionally surrounded by whitespace.
  value parse_document() {
    value result = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected data after the end of the JSON value");
    return result;
  }

 private:
  static constexpr int max_depth = 32;

  [[noreturn]] void fail(const std::string& problem) const {
    throw_io_error(file_, what_ + " is not valid: " + problem + " at byte " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }
  void expect(char c) {
    skip_whitespace();
    if (at_end()) fail(std::string("expected '") + c + "', the text ends");
    if (peek() != c) fail(std::string("expected '") + c + "', found " + quoted_excerpt(text_.substr(pos_, 1)));
    ++pos_;
  }

  value parse_value(int depth) {
    if (depth > max_depth) fail("nested more than " + std::to_string(max_depth) + " levels deep");
    skip_whitespace();
    if (at_end()) fail("expected a value, the text ends");
    const char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      value v;
      v.type = value::kind::string;
      v.text = parse_string();
      return v;
    }
    if (c >= '0' && c <= '9') return parse_integer();
    if (c == '-') fail("negative numbers are not allowed here");
    if (c == 't' || c == 'f' || c == 'n') fail("true, false and null are not allowed here");
    fail("unexpected character " + quoted_excerpt(text_.substr(pos_, 1)));
  }

  value parse_object(int depth) {
    value v;
    v.type = value::kind::object;
    std::unordered_set<std::string> seen;
    ++pos_;  // '{'
    skip_whitespace();
    if (!at_end() && peek() == '}') return ++pos_, v;
    for (;;) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key");
      const std::size_t key_position = pos_;
      std::string key = parse_string();
      // A set, not a scan of the keys so far: a 100 MB header may hold millions of keys.
      if (!seen.insert(key).second) pos_ = key_position, fail("duplicate key " + quoted_excerpt(key));
      expect(':');
      v.items.push_back(parse_value(depth + 1));
      v.keys.push_back(std::move(key));
      skip_whitespace();
      if (at_end()) fail("expected ',' or '}', the text ends");
      if (peek() == '}') return ++pos_, v;
      if (peek() != ',') fail("expected ',' or '}', found " + quoted_excerpt(text_.substr(pos_, 1)));
      ++pos_;
    }
  }

  value parse_array(int depth) {
    value v;
    v.type = value::kind::array;
    ++pos_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') return ++pos_, v;
    for (;;) {
      v.items.push_back(parse_value(depth + 1));
      skip_whitespace();
      if (at_end()) fail("expected ',' or ']', the text ends");
      if (peek() == ']') return ++pos_, v;
      if (peek() != ',') fail("expected ',' or ']', found " + quoted_excerpt(text_.substr(pos_, 1)));
      ++pos_;
    }
  }

  value parse_integer() {
    value v;
    v.type = value::kind::integer;
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9') {
      fail("numbers must not have leading zeros");
    }
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const auto digit = static_cast<std::uint64_t>(peek() - '0');
      if (v.integer > (UINT64_MAX - digit) / 10) fail("integer larger than 2^64 - 1");
      v.integer = v.integer * 10 + digit;
      ++pos_;
    }
    if (!at_end() && (peek() == '.' || peek() == 'e' || peek() == 'E')) {
      fail("only non-negative integers are allowed here");
    }
    return v;
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("\\u needs four hex digits");
    unsigned result = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text_[pos_++];
      result <<= 4;
      if (c >= '0' && c <= '9') result |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') result |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') result |= unsigned(c - 'A' + 10);
      else --pos_, fail("\\u needs four hex digits");
    }
    return result;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const auto byte = static_cast<unsigned char>(peek());
      if (byte == '"') return ++pos_, out;
      if (byte < 0x20) fail("control character in a string (it must be escaped)");
      if (byte != '\\') {
        const std::size_t length = utf8_sequence_length(text_, pos_);
        if (length == 0) fail("invalid UTF-8 in a string");
        out.append(text_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      ++pos_;
      if (at_end()) fail("unterminated string");
      const char escape = text_[pos_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t code_point = parse_hex4();
          if (code_point >= 0xdc00 && code_point <= 0xdfff) fail("unpaired low surrogate in \\u escape");
          if (code_point >= 0xd800 && code_point <= 0xdbff) {
            if (text_.substr(pos_, 2) != "\\u") fail("high surrogate without a following \\u low surrogate");
            pos_ += 2;
            const std::uint32_t low = parse_hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("high surrogate followed by a non-low surrogate");
            code_point = 0x10000 + ((code_point - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, code_point);
          break;
        }
        default: --pos_, fail("unknown escape \\" + std::string(1, escape));
      }
    }
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  std::string what_;
  std::size_t pos_ = 0;
};

// Appends `text` as a JSON string. The caller checks valid_utf8 first; control
// characters, quotes and backslashes are escaped, everything else is written as is.
inline void append_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace tl::detail::json
