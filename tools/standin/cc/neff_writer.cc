#include "neff_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "error.h"
#include "files.h"

namespace standin::cc {
namespace {

constexpr mode_t kFileMode = 0644;

void write_file(const std::string& path, const std::string& bytes, const std::string& output_path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
  if (fd < 0) throw failure("cannot write output '" + output_path + "': " + errno_text());
  const bool ok = write_all(fd, bytes);
  const std::string reason = ok ? "" : errno_text();
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) {
    throw failure("cannot write output '" + output_path + "': " + (ok ? errno_text() : reason));
  }
}

// "<dir>/.<name>.standin-tmp.<pid>": hidden, in the same directory so the
// rename stays on one file system, and unique per process.
std::string temp_path_for(const std::string& output_path) {
  const std::size_t slash = output_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : output_path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? output_path : output_path.substr(slash + 1);
  return dir + "." + name + ".standin-tmp." + std::to_string(getpid());
}

}  // namespace

void write_neff_atomically(const std::string& output_path, const std::string& neff) {
  const std::string temp_path = temp_path_for(output_path);
  try {
    write_file(temp_path, neff, output_path);
  } catch (...) {
    ::unlink(temp_path.c_str());
    throw;
  }
  if (std::rename(temp_path.c_str(), output_path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(temp_path.c_str());
    throw failure("cannot move output into place at '" + output_path + "': " + reason);
  }
}

void write_neff_in_place(const std::string& output_path, const std::string& neff) {
  write_file(output_path, neff, output_path);
}

}  // namespace standin::cc
