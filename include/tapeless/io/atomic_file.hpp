// Writing a file so that readers see either the old contents or the complete new ones:
// the bytes go to a temporary file in the target's directory, which is synced, closed
// and then renamed over the target (rename within one file system is atomic on POSIX).
// On any failure the temporary file is removed, the target is left as it was, and one
// tl::io_error names the target and the step that failed. As with any rename-based save,
// a symlink at the target is replaced by the file, and the old file's mode is not kept.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include "tapeless/io/failure.hpp"
#include "tapeless/io/read_file.hpp"

namespace tl::detail {

enum class write_step { create, write, sync, close, rename };

inline const char* write_step_name(write_step step) {
  switch (step) {
    case write_step::create: return "creating the temporary file";
    case write_step::write: return "writing";
    case write_step::sync: return "fsync";
    case write_step::close: return "closing the temporary file";
    case write_step::rename: return "renaming the temporary file over the target";
  }
  return "?";
}

// Fault injection for tests: called before each step (before every write() call for
// write_step::write); returning true makes that step fail as if the system call had
// (ENOSPC for writes, EIO otherwise). A real full disk or read-only directory cannot be
// arranged reliably in a test: tests often run as root, which ignores permissions, and
// /dev/full cannot be renamed onto. The hook runs the same cleanup code as a real failure.
using write_fault = std::function<bool(write_step)>;

// A name no other writer uses: process id, a per-process counter and the clock.
inline std::filesystem::path temporary_sibling(const std::filesystem::path& target, unsigned attempt) {
  static std::atomic<unsigned long> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::string name = "." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter++) + "-" + std::to_string(ticks % 1000000007) + "-" +
                           std::to_string(attempt);
  return target.parent_path() / name;
}

inline void write_file_atomically(const std::filesystem::path& target,
                                  std::span<const std::span<const std::byte>> pieces, const write_fault& fault = {}) {
  const auto injected = [&](write_step step) { return fault && fault(step); };
  std::filesystem::path temporary;
  const auto fail = [&](write_step step, int error) {
    if (!temporary.empty()) {
      std::error_code ignored;  // the original error is the one worth reporting
      std::filesystem::remove(temporary, ignored);
    }
    throw_io_error(target, std::string("cannot save: ") + write_step_name(step) + " failed: " + errno_text(error) +
                               "; the previous contents, if any, are unchanged");
  };

  // An empty path or one ending in '/' names no file ("Is a directory" said it badly).
  if (target.filename().empty())
    throw_io_error(target, target.empty() ? "cannot save: the path is empty"
                                          : "cannot save: the path names a directory, not a file");
  // Saving replaces the target by a rename: refused for one that is not a regular file
  // (run as root, saving to /dev/null would have replaced the device by a file).
  {
    std::error_code error;
    const auto status = std::filesystem::status(target, error);  // through symlinks
    if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      throw_io_error(target, "cannot save: it exists and is not a regular file (a save replaces the file)");
  }
  int fd = -1;
  for (unsigned attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    if (injected(write_step::create)) fail(write_step::create, EIO);
    const auto candidate = temporary_sibling(target, attempt);
    // O_EXCL: never reuse an existing file; mode 0666 lets the umask decide, as for any new file.
    do fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) temporary = candidate;
    else if (errno != EEXIST) fail(write_step::create, errno);
  }
  if (fd < 0) fail(write_step::create, EEXIST);
  file_descriptor file(fd);

  for (const auto piece : pieces) {
    std::size_t done = 0;
    while (done < piece.size()) {
      if (injected(write_step::write)) fail(write_step::write, ENOSPC);
      const std::size_t chunk = std::min<std::size_t>(piece.size() - done, std::size_t{1} << 30);
      const ssize_t written = ::write(fd, piece.data() + done, chunk);
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) fail(write_step::write, errno);
      if (written == 0) fail(write_step::write, ENOSPC);
      done += static_cast<std::size_t>(written);
    }
  }
  // write() goes straight to the kernel (no stdio buffer to fflush); fsync makes the data
  // durable before the rename can make it visible under the target's name.
  if (injected(write_step::sync)) fail(write_step::sync, EIO);
  if (::fsync(fd) != 0) fail(write_step::sync, errno);
  if (injected(write_step::close)) {
    file.close_now();
    fail(write_step::close, EIO);
  }
  if (file.close_now() != 0) fail(write_step::close, errno);

  if (injected(write_step::rename)) fail(write_step::rename, EIO);
  std::error_code renamed;
  std::filesystem::rename(temporary, target, renamed);
  if (renamed) fail(write_step::rename, renamed.value());

  // Best effort: syncing the directory makes the rename itself survive a power cut. Its
  // failure is not reported: the target already holds the complete new contents, and an
  // exception here would claim a save failed that did not.
  const auto directory = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    file_descriptor dir(dir_fd);
    (void)::fsync(dir_fd);
  }
}

}  // namespace tl::detail
