// After a real compile the training script would load the NEFF; the stand-in
// instead checks that the file it got back was compiled from its graph.
#pragma once

#include <string>

namespace standin::train {

// Throws failure() when `neff_path` is missing or its "graph-sha256:" header
// line differs from `graph_sha256`.
void check_neff(const std::string& neff_path, const std::string& graph_path,
                const std::string& graph_sha256);

}  // namespace standin::train
