#pragma once
// What every program's main shares: turning errors into one line and an exit
// code, and reading the cache settings from NEURON_CC_FLAGS and the command
// line.

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <npc/util/command_line.hpp>

#include <npc/config/settings.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// Runs `body`, printing "<program>: error: <message>" for an npc::Error (its
// exit code), a CLI11 parse error (exit 2) or anything else (exit 1).
int run_program(const std::string& program, const std::function<int()>& body);

using config::Settings;
using util::parse_command_line;

// The settings (config::settings_from_environment), and for a cache shared
// by group (NPC_CACHE_TRUST) the umask that lets the group write what this
// program creates. Called once at the start, before any thread.
[[nodiscard]] Settings load_settings(const config::CacheSettings& overrides);

// Adds --cache_dir, --cache_size, --cache_ttl (the NEURON_CC_FLAGS options)
// to a command line.
void add_cache_options(CLI::App& app, config::CacheSettings& settings,
                       std::string& cache_size_text, std::string& cache_ttl_text);
// Parses what add_cache_options collected.
void finish_cache_options(config::CacheSettings& settings, const std::string& cache_size_text,
                          const std::string& cache_ttl_text);

} // namespace npc::cli
