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

// A piece of user-controlled text for a message: quoted, control bytes escaped, and cut
// short, so a fuzzed or binary file cannot flood a log line.
inline std::string quoted_excerpt(std::string_view text, std::size_t limit = 40) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += text[i];
    }
  }
  if (text.size() > limit) out += "...";
  return out + "'";
}

// a * b, or false when it does not fit in std::size_t (sizes from a file are untrusted).
inline bool checked_multiply(std::size_t a, std::size_t b, std::size_t& product) {
  return !__builtin_mul_overflow(a, b, &product);
}

}  // namespace tl::detail
