#include "path_search.h"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "env.h"

namespace standin::train {

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string search_path(const std::string& name) {
  const std::string path = env_string("PATH").value_or("");
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return {};
}

}  // namespace standin::train
