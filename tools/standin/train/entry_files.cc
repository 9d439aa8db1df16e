#include "entry_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "error.h"
#include "files.h"

namespace standin::train {

bool path_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string temporary_path_for(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + name + "." + std::to_string(::getpid()) + ".tmp";
}

void publish_file(const std::string& path, std::string_view contents, IfPresent if_present,
                  const std::string& what) {
  static constexpr mode_t kFileMode = 0644;
  if (if_present == IfPresent::kKeep && path_exists(path)) return;
  const std::string temporary = temporary_path_for(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
  bool ok = fd >= 0 && write_all(fd, contents);
  std::string reason = ok ? "" : errno_text();
  if (fd >= 0 && ::close(fd) != 0 && ok) {
    ok = false;
    reason = errno_text();
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    throw failure("cannot write " + what + " '" + temporary + "': " + reason);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    reason = errno_text();
    ::unlink(temporary.c_str());
    throw failure("cannot rename '" + temporary + "' to " + what + " '" + path + "': " + reason);
  }
}

void rename_file(const std::string& from, const std::string& to, const std::string& what) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw failure("cannot rename '" + from + "' to " + what + " '" + to + "': " + errno_text());
  }
}

void copy_file_over(const std::string& from, const std::string& to) {
  std::error_code error;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, error);
  if (error) throw failure("cannot copy '" + from + "' to '" + to + "': " + error.message());
}

void create_directories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw failure("cannot create '" + path + "': " + error.message());
}

}  // namespace standin::train
