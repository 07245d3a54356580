#pragma once
// `--verify`: the grader re-runs the cheap checks itself and marks evidence that does not
// reproduce (CriterionResult::reproduced = false earns nothing):
//   seed_worked_example  the ledger rule (strategy::apply_rule) on the recorded inputs
//   deterministic_sim.   the simulation again (the check itself already re-simulates once)
//   kill_resume          the reference and the first trial of the recorded proof, from its
//                        recorded inputs (model, plan, seed, steps, checkpoint interval, fault
//                        seed): both final-state hashes must equal the recorded ones
// A re-run that cannot start here (a model file this machine lacks) is said, not penalized.
#include "rubric/evidence.h"
#include "rubric/grade.h"

namespace parlab::rubric {

void verify_report(const Rubric& rubric, const Evidence& evidence, const GradeOptions& options, Report& report);

}  // namespace parlab::rubric
