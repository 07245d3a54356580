#pragma once
// Preset TOML files compiled into the binary (generated from strategy/presets/ by CMake), so
// `parlab plan --model gpt-175b` works from any directory.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parlab::strategy {

// kind: "models" or "clusters"; name without ".toml".
std::optional<std::string_view> embedded_preset(std::string_view kind, std::string_view name);
std::vector<std::string> embedded_preset_names(std::string_view kind);

}  // namespace parlab::strategy
