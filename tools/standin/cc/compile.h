// One `neuronx-cc compile` run: read the graph, pay the simulated cost,
// inject any configured fault, write the NEFF.
#pragma once

#include "cli.h"
#include "settings.h"

namespace standin::cc {

// Returns the process exit status; throws StandinError on ordinary
// failures (unreadable graph, unwritable output). Some faults never return.
int run_compile(const CompileRequest& request, const Settings& settings);

}  // namespace standin::cc
