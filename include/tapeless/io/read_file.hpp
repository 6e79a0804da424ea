// Reading a whole file into memory. The loaders parse from this buffer, so a file that
// changes on disk while it is parsed cannot make them read torn data.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tapeless/io/failure.hpp"

namespace tl::detail {

class file_descriptor {
 public:
  explicit file_descriptor(int fd) : fd_(fd) {}
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  ~file_descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports close()'s result (a deferred write error can surface here).
  int close_now() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

inline std::vector<std::byte> read_file_bytes(const std::filesystem::path& file) {
  int fd;
  do fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_io_error(file, "cannot open for reading: " + errno_text(errno));
  file_descriptor guard(fd);

  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_io_error(file, "cannot read its size: " + errno_text(errno));
  // A directory, FIFO or device has no size to check the contents against (and
  // /dev/zero would never end).
  if (!S_ISREG(info.st_mode)) throw_io_error(file, "is not a regular file");
  const auto size = static_cast<std::size_t>(info.st_size);

  std::vector<std::byte> bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw_io_error(file, "is " + std::to_string(size) + " bytes, too large to read into memory");
  }
  std::size_t done = 0;
  while (done < size) {
    const std::size_t chunk = std::min<std::size_t>(size - done, std::size_t{1} << 30);
    const ssize_t got = ::read(fd, bytes.data() + done, chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_io_error(file, "read failed: " + errno_text(errno));
    if (got == 0) throw_io_error(file, "became shorter while it was being read");
    done += static_cast<std::size_t>(got);
  }
  char extra;
  ssize_t more;
  do more = ::read(fd, &extra, 1);
  while (more < 0 && errno == EINTR);
  if (more > 0) throw_io_error(file, "became longer while it was being read");
  return bytes;
}

}  // namespace tl::detail
