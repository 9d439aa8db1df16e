// Finding the programs the training script starts (the compile entry, the
// compiler) the way a shell does: an explicit path, or a name on PATH.
#pragma once

#include <string>

namespace standin::train {

bool is_executable_file(const std::string& path);

// The first executable `<dir>/<name>` for the directories of $PATH (an empty
// entry means the current directory); "" when there is none.
std::string search_path(const std::string& name);

}  // namespace standin::train
