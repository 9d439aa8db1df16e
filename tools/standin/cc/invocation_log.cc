#include "invocation_log.h"

#include <fcntl.h>
#include <unistd.h>

#include "error.h"
#include "files.h"

namespace standin::cc {

void log_invocation(const std::string& log_path, const std::string& graph_sha256,
                    const std::string& graph_path) {
  static constexpr mode_t kFileMode = 0644;
  const std::string line =
      std::to_string(getpid()) + " " + graph_sha256 + " " + graph_path + "\n";
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, kFileMode);
  if (fd < 0) throw failure("cannot open invocation log '" + log_path + "': " + errno_text());
  const ssize_t written = ::write(fd, line.data(), line.size());
  const std::string reason = errno_text();
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    throw failure("cannot append to invocation log '" + log_path + "': " + reason);
  }
}

}  // namespace standin::cc
