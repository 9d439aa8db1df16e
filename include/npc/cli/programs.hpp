#pragma once
// Entry points of the programs; each src/main/<name>.cpp only calls one.

namespace npc::cli {

int neuron_cache_main(int argc, char** argv);
// s3_build: in the static build of the wrapper, the path (relative to the
// program) of its dynamic build, which a command that needs S3 is handed to.
int neuron_cc_wrapper_main(int argc, char** argv, const char* s3_build = nullptr);
int neuron_parallel_compile_main(int argc, char** argv);

} // namespace npc::cli
