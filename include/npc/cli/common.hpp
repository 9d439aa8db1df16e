#pragma once
// What every program's main shares: turning errors into one line and an exit
// code, and reading the cache settings from NEURON_CC_FLAGS. No CLI11 here:
// neuron_cc_wrapper, started once per graph, parses its words by hand.

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <npc/config/settings.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// Runs `body`, printing "<program>: error: <message>" for an npc::Error (its
// exit code) or anything else (exit 1).
int run_program(const std::string& program, const std::function<int()>& body);

using config::Settings;

// The settings (config::settings_from_environment), and for a cache shared
// by group (NPC_CACHE_TRUST) the umask that lets the group write what this
// program creates. Called once at the start, before any thread.
[[nodiscard]] Settings load_settings(const config::CacheSettings& overrides);

} // namespace npc::cli
