#pragma once
// What kind of incident the job runner (run_training.h) reports, one enumerator per kind the
// runtime produces; the results database keeps each under its own kind (record/run_recorder.h).
//
//   crash       a rank exited on its own (signal, abort, non-zero status)
//   killed      a rank was killed on purpose (an injected kill or exit)
//   lost        a rank's device is gone with it (the lose-rank fault): the job shrinks
//   unhealthy   the health hook (TrainJobSpec::unhealthy) failed a running rank
//   hang        a collective timed out, or a rank went silent (heartbeat)
//   straggler   a rank fell persistently behind (not a failure: the job went on)
#include <string_view>

namespace parlab::launch {

enum class IncidentKind { kCrash, kKilled, kLost, kUnhealthy, kHang, kStraggler };

// The spellings above ("crash", ..., "straggler") and back; parse throws ConfigError naming
// `field`, the text and every spelling.
std::string_view to_string(IncidentKind kind);
IncidentKind parse_incident_kind(std::string_view text, std::string_view field = "incident.kind");

}  // namespace parlab::launch
