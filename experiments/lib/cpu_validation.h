#pragma once
// docs/validation.md's CPU section: every split's prediction against its measurement on this
// machine, from a fidelity run's database (scripts/fidelity-check.sh): split x workers, the
// simulated step (the analytic one where nothing was simulated), the measured step +- its spread,
// the error, the machine it was measured on and the load other jobs put on it meanwhile. Without a database the section
// says so, which keeps `parlab validate` deterministic (a test compares its output with the committed file).
#include <string>

#include "db/results_store.h"

namespace parlab::experiments {

inline constexpr const char* kCpuSectionBegin = "<!-- cpu-validation: begin -->";
inline constexpr const char* kCpuSectionEnd = "<!-- cpu-validation: end -->";

// The section, between kCpuSectionBegin and kCpuSectionEnd lines; `store` null: the placeholder.
std::string cpu_validation_markdown(db::ResultsStore* store);

// `doc` without its CPU section (the markers and what lies between them).
std::string without_cpu_section(const std::string& doc);

}  // namespace parlab::experiments
