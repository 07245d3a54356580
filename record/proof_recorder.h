#pragma once
// ProofRecorder: the kill-and-resume proof (runtime/launch/kill_resume_proof.h) kept in the
// results database. Every run of the proof (reference and trials) is a measured run recorded by
// RunRecorder under `experiment`; the proof row goes on the reference run (and the experiment).
//
//   record::ProofRecorder rec(store, experiment);
//   options.sink = &rec;
//   ProofReport report = launch::run_kill_resume_proof(options);   // report.proof_id is the row
#include <memory>
#include <optional>

#include "db/results_store.h"
#include "runtime/launch/kill_resume_proof.h"

namespace parlab::record {

class ProofRecorder final : public launch::ProofSink {
 public:
  explicit ProofRecorder(db::ResultsStore& store, std::optional<db::ExperimentId> experiment = {})
      : store_(&store), experiment_(experiment) {}
  std::unique_ptr<launch::RunSink> begin_run(const launch::TrainJobSpec& spec) override;
  std::optional<int64_t> add_proof(const launch::ProofReport& report) override;

 private:
  db::ResultsStore* store_;
  std::optional<db::ExperimentId> experiment_;
};

// The proof as a results-database row ("kill_resume_bitwise", or "kill_resume_elastic" with
// shrink); the caller sets run and/or experiment.
db::ProofRecord to_proof_record(const launch::ProofReport& report);

}  // namespace parlab::record
