#pragma once
// NEURON_CC_FLAGS's cache options on a CLI11 command line (neuron_cache's).

#include <string>

#include <CLI/CLI.hpp>

#include <npc/config/settings.hpp>

namespace npc::cli {

// Adds --cache_dir, --cache_size, --cache_ttl (the NEURON_CC_FLAGS options)
// to a command line.
void add_cache_options(CLI::App& app, config::CacheSettings& settings,
                       std::string& cache_size_text, std::string& cache_ttl_text);
// Parses what add_cache_options collected.
void finish_cache_options(config::CacheSettings& settings, const std::string& cache_size_text,
                          const std::string& cache_ttl_text);

} // namespace npc::cli
