#pragma once
// A made-up environment for code that looks variables up through an
// npc::storage::EnvLookup (load_s3_config, S3Storage::open): it sees only
// the variables the test sets, never the developer's shell.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <npc/storage/s3_config.hpp>

namespace npc::test {

using FakeEnv = std::map<std::string, std::string>;

// Looks names up in a copy of `vars`; any other name is unset.
[[nodiscard]] inline storage::EnvLookup env_lookup(FakeEnv vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

} // namespace npc::test
