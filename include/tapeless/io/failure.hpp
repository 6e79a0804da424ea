// How the io headers word their errors: every message starts "tapeless: FILE: " so a
// log line alone says which file failed, then says what is wrong with it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "tapeless/core/errors.hpp"

namespace tl::detail {

inline std::string file_message(const std::filesystem::path& file, std::string_view problem) {
  return "tapeless: " + file.string() + ": " + std::string(problem);
}

// The file or its contents are wrong (tl::io_error).
[[noreturn]] inline void throw_io_error(const std::filesystem::path& file, std::string_view problem) {
  throw io_error(file_message(file, problem));
}

// A size the caller asked for does not match the file or another argument (tl::shape_error).
[[noreturn]] inline void throw_shape_error(const std::filesystem::path& file, std::string_view problem) {
  throw shape_error(file_message(file, problem));
}

// strerror() is not thread-safe; the error category's message is.
inline std::string errno_text(int error) { return std::generic_category().message(error); }

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is invalid
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = at(i);
  if (lead < 0x80) return 1;
  std::size_t length;
  unsigned char low = 0x80, high = 0xbf;  // allowed range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead == 0xe0) length = 3, low = 0xa0;
  else if (lead == 0xed) length = 3, high = 0x9f;
  else if (lead >= 0xe1 && lead <= 0xef) length = 3;
  else if (lead == 0xf0) length = 4, low = 0x90;
  else if (lead == 0xf4) length = 4, high = 0x8f;
  else if (lead >= 0xf1 && lead <= 0xf3) length = 4;
  else return 0;
  if (i + length > text.size()) return 0;
  if (at(i + 1) < low || at(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return length;
}

// A piece of user-controlled text for a message: quoted, control bytes and bytes that
// are not valid UTF-8 escaped (\xNN: a log or terminal shows them, rather than a
// replacement character or garbage), and cut short after `limit` bytes (never inside a
// character), so a fuzzed or binary file cannot flood a log line.
inline std::string quoted_excerpt(std::string_view text, std::size_t limit = 40) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  std::size_t i = 0;
  while (i < text.size() && i < limit) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0 || byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 15];
      ++i;
    } else {
      if (i + length > limit) break;
      out.append(text.substr(i, length));
      i += length;
    }
  }
  if (i < text.size()) out += "...";
  return out + "'";
}

// a * b, or false when it does not fit in std::size_t (sizes from a file are untrusted).
inline bool checked_multiply(std::size_t a, std::size_t b, std::size_t& product) {
  return !__builtin_mul_overflow(a, b, &product);
}

}  // namespace tl::detail
