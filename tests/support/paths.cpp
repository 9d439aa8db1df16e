#include "paths.hpp"

#include <gtest/gtest.h>

namespace npc::test {

fs::path bin_dir() { return NPC_BIN_DIR; }
fs::path standin_dir() { return NPC_STANDIN_DIR; }
fs::path source_dir() { return NPC_SOURCE_DIR; }
fs::path program(const std::string& name) { return bin_dir() / name; }
fs::path standin_compiler() { return standin_dir() / "neuronx-cc"; }
fs::path wrapper_s3_build() {
  std::string relative = NPC_WRAPPER_S3_BUILD;
  return relative.empty() ? fs::path() : (bin_dir() / relative).lexically_normal();
}
fs::path standin_train_script() { return standin_dir() / "standin_train"; }

fs::path hlo_samples_dir() {
  fs::path dir = source_dir().parent_path() / "shared" / "hlo-samples";
  if (!fs::is_directory(dir)) ADD_FAILURE() << "missing " << dir << " (shared/ beside the project)";
  return dir;
}

} // namespace npc::test
