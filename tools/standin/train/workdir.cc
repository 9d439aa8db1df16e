#include "workdir.h"

#include <stdlib.h>

#include <filesystem>
#include <vector>

#include "env.h"
#include "error.h"
#include "files.h"

namespace standin::train {

Workdir::Workdir(const std::optional<std::string>& requested) {
  if (requested) {
    std::error_code error;
    std::filesystem::create_directories(*requested, error);
    if (error) throw failure("cannot create work directory '" + *requested + "': " + error.message());
    path_ = *requested;
    return;
  }
  const std::string base = env_string("TMPDIR").value_or("/tmp");
  std::string pattern = base + "/standin_train.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw failure("cannot create a work directory under '" + base + "': " + errno_text());
  }
  path_ = buffer.data();
  temporary_ = true;
}

Workdir::~Workdir() {
  if (!temporary_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace standin::train
