// Which compile protocol the stand-in training script plays:
//  - wrapper: it calls the project's `neuron_cc_wrapper compile` per graph
//    (the original behaviour);
//  - torch-neuronx: it reads and writes the compile cache itself, as current
//    torch-neuronx / libneuronxla do (see framework_cache.h);
//  - torch-neuronx-legacy: the same, as older releases did (the developer
//    guide's): --cache_dir=DIR puts the cache at DIR/neuron-compile-cache,
//    and the cache-path log is never written (the launcher learns each
//    graph's root from its path on the "Extracting graphs" line).
#pragma once

#include <optional>
#include <string>

namespace standin::train {

enum class Protocol { kWrapper, kTorchNeuronx, kTorchNeuronxLegacy };

inline constexpr char kProtocolEnv[] = "STANDIN_TRAIN_PROTOCOL";

// "wrapper", "torch-neuronx" or "torch-neuronx-legacy"; anything else is a usage error naming `what`.
Protocol parse_protocol(const std::string& text, const std::string& what);
const char* protocol_name(Protocol protocol);

// The command line's --protocol if given, else $STANDIN_TRAIN_PROTOCOL, else
// wrapper.
Protocol resolve_protocol(const std::optional<Protocol>& from_command_line);

}  // namespace standin::train
