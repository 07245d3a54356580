#include "db/records.h"

#include <array>
#include <string>
#include <utility>

#include "base/errors.h"

namespace parlab::db {

namespace {

// One table per enum; the spellings must match the CHECK constraints in db/schema.sql.
template <class Enum, std::size_t N>
using Names = std::array<std::pair<Enum, std::string_view>, N>;

constexpr Names<RunKind, 3> kRunKinds{{
    {RunKind::kAnalytic, "analytic"},
    {RunKind::kSimulated, "simulated"},
    {RunKind::kMeasured, "measured"},
}};

constexpr Names<RunStatus, 4> kRunStatuses{{
    {RunStatus::kRunning, "running"},
    {RunStatus::kCompleted, "completed"},
    {RunStatus::kFailed, "failed"},
    {RunStatus::kKilled, "killed"},
}};

constexpr Names<IncidentKind, 9> kIncidentKinds{{
    {IncidentKind::kCrash, "crash"},
    {IncidentKind::kKilled, "killed"},
    {IncidentKind::kHang, "hang"},
    {IncidentKind::kStraggler, "straggler"},
    {IncidentKind::kNan, "nan"},
    {IncidentKind::kOom, "oom"},
    {IncidentKind::kNetwork, "network"},
    {IncidentKind::kCheckpointCorrupt, "checkpoint_corrupt"},
    {IncidentKind::kOther, "other"},
}};

template <class Enum, std::size_t N>
std::string_view name_of(const Names<Enum, N>& names, Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
Enum parse(const Names<Enum, N>& names, std::string_view text, std::string_view field) {
  std::string allowed = "one of";
  for (const auto& [v, name] : names) {
    if (name == text) return v;
    allowed += std::string(allowed.size() == 6 ? " " : ", ") + std::string(name);
  }
  throw ConfigError(std::string(field), "'" + std::string(text) + "'", allowed);
}

}  // namespace

std::string_view to_string(RunKind kind) { return name_of(kRunKinds, kind); }
std::string_view to_string(RunStatus status) { return name_of(kRunStatuses, status); }
std::string_view to_string(IncidentKind kind) { return name_of(kIncidentKinds, kind); }

RunKind parse_run_kind(std::string_view text, std::string_view field) { return parse(kRunKinds, text, field); }
RunStatus parse_run_status(std::string_view text, std::string_view field) { return parse(kRunStatuses, text, field); }
IncidentKind parse_incident_kind(std::string_view text, std::string_view field) {
  return parse(kIncidentKinds, text, field);
}

}  // namespace parlab::db
