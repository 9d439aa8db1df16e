#pragma once
// Entry points of the programs; each src/main/<name>.cpp only calls one.

namespace npc::cli {

int neuron_cache_main(int argc, char** argv);
int neuron_cc_wrapper_main(int argc, char** argv);
int neuron_parallel_compile_main(int argc, char** argv);

} // namespace npc::cli
