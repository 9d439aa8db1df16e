// Which compile protocol the stand-in training script plays:
//  - wrapper: it calls the project's `neuron_cc_wrapper compile` per graph
//    (the original behaviour);
//  - torch-neuronx: it reads and writes the compile cache itself, as current
//    torch-neuronx / libneuronxla do (see framework_cache.h).
#pragma once

#include <optional>
#include <string>

namespace standin::train {

enum class Protocol { kWrapper, kTorchNeuronx };

inline constexpr char kProtocolEnv[] = "STANDIN_TRAIN_PROTOCOL";

// "wrapper" or "torch-neuronx"; anything else is a usage error naming `what`.
Protocol parse_protocol(const std::string& text, const std::string& what);
const char* protocol_name(Protocol protocol);

// The command line's --protocol if given, else $STANDIN_TRAIN_PROTOCOL, else
// wrapper.
Protocol resolve_protocol(const std::optional<Protocol>& from_command_line);

}  // namespace standin::train
