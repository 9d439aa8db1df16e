#include <npc/cli/programs.hpp>

int main(int argc, char** argv) { return npc::cli::neuron_cc_wrapper_main(argc, argv); }
