// One line per compile invocation, so tests can count how many compiler
// processes the product started and for which graphs.
#pragma once

#include <string>

namespace standin::cc {

// Appends "<pid> <graph sha256> <graph path>\n" with a single write() on an
// O_APPEND descriptor, which keeps lines whole when many compilers append
// at once. Throws failure() if the log cannot be written.
void log_invocation(const std::string& log_path, const std::string& graph_sha256,
                    const std::string& graph_path);

}  // namespace standin::cc
