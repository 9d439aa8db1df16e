// The little JSON the framework writes into a cache entry.
#pragma once

#include <string>
#include <vector>

namespace standin::train {

// A JSON list of strings in Python's json.dumps layout: ["a", "b"], [] when
// empty. '"', '\' and control characters are escaped; other bytes (UTF-8
// included) are written as they are.
std::string json_string_list(const std::vector<std::string>& items);

}  // namespace standin::train
