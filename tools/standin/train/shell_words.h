// Splitting NEURON_CC_FLAGS into words the way the framework does (it uses
// Python's shlex.split): whitespace separates words; '...' keeps everything
// literally; "..." keeps everything but lets a backslash escape " and \;
// outside quotes a backslash keeps the next character.
#pragma once

#include <string>
#include <vector>

namespace standin::train {

// Throws a usage error naming `what` on an unterminated quote or a trailing
// backslash, as shlex raises "No closing quotation" / "No escaped character".
std::vector<std::string> split_shell_words(const std::string& text, const std::string& what);

}  // namespace standin::train
