#include "protocol.h"

#include "env.h"
#include "error.h"

namespace standin::train {

Protocol parse_protocol(const std::string& text, const std::string& what) {
  if (text == "wrapper") return Protocol::kWrapper;
  if (text == "torch-neuronx") return Protocol::kTorchNeuronx;
  if (text == "torch-neuronx-legacy") return Protocol::kTorchNeuronxLegacy;
  throw usage_error(what + ": invalid choice: '" + text +
                    "' (choose from 'wrapper', 'torch-neuronx', 'torch-neuronx-legacy')");
}

const char* protocol_name(Protocol protocol) {
  switch (protocol) {
    case Protocol::kTorchNeuronx: return "torch-neuronx";
    case Protocol::kTorchNeuronxLegacy: return "torch-neuronx-legacy";
    case Protocol::kWrapper: break;
  }
  return "wrapper";
}

Protocol resolve_protocol(const std::optional<Protocol>& from_command_line) {
  if (from_command_line) return *from_command_line;
  if (const auto from_env = env_string(kProtocolEnv)) return parse_protocol(*from_env, kProtocolEnv);
  return Protocol::kWrapper;
}

}  // namespace standin::train
