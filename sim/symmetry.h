#pragma once
// Tensor-parallel symmetry: when a plan's TP positions are interchangeable, simulating position 0
// of every TP group is simulating them all (issue 34: scale with the work, not the ranks).
//
// The positions of a TP group run the same program on the same schedule: each reaches every TP
// collective at the moment the others do, so the collective starts then for all of them. What
// else a position sends (data- and pipeline-parallel traffic) stays with the same position of
// other groups. When that traffic crosses links no other position touches, and the TP group's
// own links carry nothing else, every position's timeline is position 0's to the last bit:
//
//   - collective steps alone on their links are timed in closed form (ExecOptions::closed_form),
//     and no core is shared by ranks or by compute and communication (not cpu-local);
//   - no faults (they name ranks, so they break the symmetry);
//   - every TP group lies inside one node, and a NIC per device: a position's cross-node
//     traffic leaves and enters through its own NIC links;
//   - every other group and every send joins ranks of different nodes, so none of it crosses
//     the NVLink links the TP collectives claim;
//   - every rank's program is its TP group's position-0 program with its own rank: the same ops
//     (kind, stream, sizes, dependencies, layers, chunks, tags), the same TP group, and its other
//     groups and peers shifted by its position.
//
// Then the executor runs position 0 only (ExecOptions::tp_replicas: a TP collective is timed
// over the whole group and starts when its one simulated member reaches it; the counts of
// messages, flows and ops are the world's), and replicate() gives every other position its
// representative's records. Same inputs, the same bytes of SimResult as simulating every rank
// (tests/sim/symmetry_test.cpp), in 1/tp of the actors and messages.
#include <optional>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/faults.h"
#include "sim/result.h"
#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"
#include "strategy/step_program.h"

namespace parlab::sim {

struct Symmetry {
  int replicas = 1;    // tp when every condition holds, else 1 (simulate every rank)
  std::string reason;  // which condition failed (empty when replicas > 1 or tp = 1)
};

// Checks the conditions above on one plan's programs (every rank, in rank order).
Symmetry tp_symmetry(const std::vector<strategy::StepProgram>& programs, const strategy::ClusterSpec& cluster,
                     const std::vector<Fault>& faults, const ExecOptions& options);

// Runs `programs` (every rank of a plan, in rank order): position 0 of each TP group only when
// tp_symmetry() allows it, every rank otherwise; the raw run is every rank's either way.
RawRun execute_symmetric(const std::vector<strategy::StepProgram>& programs, const strategy::ClusterSpec& cluster,
                         const std::vector<Fault>& faults, ExecOptions options, bool allow = true);

// The run of the representatives (programs[i] with TP position 0, in rank order) as every rank's:
// each rank gets its representative's records, step starts and sent bytes.
RawRun replicate(RawRun representatives, const std::vector<strategy::StepProgram>& programs);

// simulate_plan's way (sim/simulate.h), which never builds the other positions' programs: builds
// position 0's, checks the conditions on them and on every position of each stage's first TP
// group, runs them and summarizes every rank. nullopt where a condition fails, where the summary
// wants what only every rank's records give (a timeline, a detail rank of another position), or
// where the run deadlocked (the hang report names ranks): simulate every rank then.
std::optional<SimResult> simulate_symmetric(const strategy::ModelSpec& model, const strategy::Plan& plan,
                                            const strategy::ClusterSpec& cluster, const std::vector<Fault>& faults,
                                            ExecOptions options, const SummaryOptions& summary);

}  // namespace parlab::sim
