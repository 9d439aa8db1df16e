#pragma once
// Which chip the compiler builds for (neuronx-cc --target). As torch-neuronx
// decides: a --target in the flags wins; else NEURON_PLATFORM_TARGET_OVERRIDE;
// else the instance we run on, from its DMI product name (trn1.32xlarge,
// trn2.48xlarge, inf2.xlarge...); else trn1, with a warning, since a NEFF
// for the wrong chip only fails when it is loaded.
// The target never enters a cache key: the framework's keys do not hold it.

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npc::compile {

namespace fs = std::filesystem;

inline constexpr const char* kTargetOverrideVariable = "NEURON_PLATFORM_TARGET_OVERRIDE";
// Where Linux shows the instance type on EC2 (Nitro reports it as the
// product name).
inline constexpr const char* kDmiProductNamePath = "/sys/class/dmi/id/product_name";
// The targets the override may name: those of the compiler releases we
// support (neuronx-cc rejects any other --target).
inline constexpr std::array<std::string_view, 4> kKnownTargets = {"trn1", "trn1n", "trn2", "inf2"};
// When nothing names a target and the machine does not tell: what the
// compiler itself assumed before targets existed.
inline constexpr std::string_view kFallbackTarget = "trn1";

// True when the flags hold --target or --target=...
[[nodiscard]] bool flags_name_target(const std::vector<std::string>& flags);

// "trn1.32xlarge" -> trn1, "trn1n.32xlarge" -> trn1, "trn2.48xlarge" and
// "trn2u.48xlarge" -> trn2, "inf2.xlarge" -> inf2 (surrounding blanks and a
// newline allowed); nullopt for anything else.
[[nodiscard]] std::optional<std::string> target_from_product_name(std::string_view product_name);
// The same from the file holding the DMI product name; nullopt when it is
// missing, unreadable or names no instance we know.
[[nodiscard]] std::optional<std::string> detect_target(const fs::path& dmi_product_name);

enum class TargetSource { override_variable, machine, fallback };

struct Target {
  std::string name; // "trn1", ...
  TargetSource source = TargetSource::fallback;
};

// The decision for flags that name no target, from the variable's value
// (nullopt or empty: unset) and the DMI file. Throws UsageError for a value
// of the variable that is not a known target.
[[nodiscard]] Target choose_target(const std::optional<std::string>& override_value,
                                   const fs::path& dmi_product_name);

// The target to add to `flags` for this process (nullopt when the flags name
// one): the variable read now, the machine's read once. The first fallback
// logs a warning naming NEURON_PLATFORM_TARGET_OVERRIDE; later ones do not.
// Throws UsageError as choose_target does.
[[nodiscard]] std::optional<std::string> target_for(const std::vector<std::string>& flags);

} // namespace npc::compile
