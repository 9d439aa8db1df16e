// neuron_cc_wrapper as torch-neuronx starts it, once per graph: linked
// -static-pie (src/CMakeLists.txt), so that no dynamic loader maps libc and
// binds its symbols at every start, while the program keeps its address
// randomisation. It links curl_loader/refused.cpp as its libcurl loader:
// S3 is its dynamic build's, NPC_WRAPPER_S3_BUILD, which it executes first.

#include <npc/cli/programs.hpp>

int main(int argc, char** argv) { return npc::cli::neuron_cc_wrapper_main(argc, argv, NPC_WRAPPER_S3_BUILD); }
