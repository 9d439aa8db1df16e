// Deciding whether this compile suffers the injected fault: a fault may be
// limited to graphs containing a substring and to the first N attempts per
// graph, counted across processes in a state directory.
#pragma once

#include <string>

#include "settings.h"

namespace standin::cc {

// The fault to inject into this attempt, or Fault::kNone. Counts the
// attempt (one counter file per graph SHA-256, updated under flock) when
// the fault is limited to the first N attempts.
Fault fault_for_attempt(const Settings& settings, const std::string& graph,
                        const std::string& graph_sha256);

}  // namespace standin::cc
