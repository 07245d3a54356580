#include "runtime/launch/incident_kind.h"

#include <array>
#include <string>
#include <utility>

#include "base/errors.h"

namespace parlab::launch {
namespace {

constexpr std::array<std::pair<IncidentKind, std::string_view>, 6> kKinds{{
    {IncidentKind::kCrash, "crash"},
    {IncidentKind::kKilled, "killed"},
    {IncidentKind::kLost, "lost"},
    {IncidentKind::kUnhealthy, "unhealthy"},
    {IncidentKind::kHang, "hang"},
    {IncidentKind::kStraggler, "straggler"},
}};

}  // namespace

std::string_view to_string(IncidentKind kind) {
  for (const auto& [k, name] : kKinds)
    if (k == kind) return name;
  return "?";
}

IncidentKind parse_incident_kind(std::string_view text, std::string_view field) {
  std::string allowed = "one of";
  for (const auto& [k, name] : kKinds) {
    if (name == text) return k;
    allowed += std::string(allowed.size() == 6 ? " " : ", ") + std::string(name);
  }
  throw ConfigError(std::string(field), "'" + std::string(text) + "'", allowed);
}

}  // namespace parlab::launch
