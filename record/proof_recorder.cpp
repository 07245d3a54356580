#include "record/proof_recorder.h"

#include "record/run_recorder.h"

namespace parlab::record {

std::unique_ptr<launch::RunSink> ProofRecorder::begin_run(const launch::TrainJobSpec& spec) {
  return std::make_unique<RunRecorder>(RunRecorder::begin(*store_, spec, experiment_));
}

std::optional<int64_t> ProofRecorder::add_proof(const launch::ProofReport& report) {
  db::ProofRecord rec = to_proof_record(report);
  rec.run = report.reference_run;
  rec.experiment = experiment_;
  return store_->add_proof(rec);
}

db::ProofRecord to_proof_record(const launch::ProofReport& r) {
  db::ProofRecord p;
  p.kind = r.shrink ? "kill_resume_elastic" : "kill_resume_bitwise";
  p.inputs = r.inputs();
  p.result = r.headline();
  p.passed = r.passed;
  p.evidence = r.evidence();
  return p;
}

}  // namespace parlab::record
