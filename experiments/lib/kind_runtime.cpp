// Experiment kinds that need the runtime (measured scaling points, the equivalence test, the
// kill-and-resume proof). Wired to runtime/ as it lands.
#include "experiments/lib/measure.h"
#include "experiments/lib/runner.h"
#include "strategy/errors.h"

namespace parlab::experiments {

MeasureResult measure_plan(Context&, const MeasureRequest&) {
  throw RuntimeError("measured runs need the Gloo runtime, which this build does not include yet");
}

void run_equivalence(Context&, const EquivalenceTask&) {
  throw RuntimeError("the equivalence test needs the Gloo runtime, which this build does not include yet");
}

void run_kill_resume(Context&, const KillResumeTask&) {
  throw RuntimeError("the kill-and-resume proof needs the Gloo runtime, which this build does not include yet");
}

}  // namespace parlab::experiments
