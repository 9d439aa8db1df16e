#pragma once
// Where the programs under test are: the build tree's bin/ and standin/
// directories and the source tree, as CMake told us.

#include <filesystem>
#include <string>

namespace npc::test {

namespace fs = std::filesystem;

fs::path bin_dir();     // build/bin: neuron_parallel_compile, neuron_cc_wrapper, neuron_cache
fs::path standin_dir(); // build/standin: neuronx-cc, standin_train
fs::path source_dir();
fs::path program(const std::string& name); // bin_dir()/name
fs::path standin_compiler();               // standin_dir()/neuronx-cc
fs::path standin_train_script();            // standin_dir()/standin_train
fs::path hlo_samples_dir();                // ../shared/hlo-samples (a test failure when absent)
// The wrapper's dynamic build, which its static build hands S3 work to;
// empty when the wrapper is built dynamic only (sanitizer builds).
fs::path wrapper_s3_build();

} // namespace npc::test
