#pragma once
// docs/performance.md from the results document (docs/performance.json).

#include <string>

#include <nlohmann/json.hpp>

namespace bench {

[[nodiscard]] std::string render_markdown(const nlohmann::json& doc);

} // namespace bench
