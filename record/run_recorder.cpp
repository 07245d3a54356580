#include "record/run_recorder.h"

#include <map>
#include <numeric>
#include <vector>

#include "strategy/io.h"
#include "base/stats.h"

namespace parlab::record {

using namespace launch;

db::NewRun RunRecorder::new_run(const TrainJobSpec& spec, std::optional<db::ExperimentId> experiment) {
  const TrainJob job = pinned_job(spec.job, spec.nproc);
  const train::TrainConfig c = make_train_config(job, spec.nproc);
  db::NewRun r;
  r.experiment = experiment;
  r.kind = db::RunKind::kMeasured;
  r.model = job.model;
  r.cluster = job.cluster;
  r.plan = strategy::to_json(c.plan);
  r.world_size = spec.nproc;
  r.seed = job.seed;
  return r;
}

RunRecorder RunRecorder::begin(db::ResultsStore& store, const TrainJobSpec& spec,
                               std::optional<db::ExperimentId> experiment) {
  RunRecorder rec(store, store.begin_run(new_run(spec, experiment)));
  std::string faults;
  for (const std::string& f : spec.job.faults) faults += (faults.empty() ? "" : " ") + f;
  const std::vector<std::pair<std::string, std::string>> params = {
      {"nproc", std::to_string(spec.nproc)},
      {"min_nproc", std::to_string(spec.min_nproc > 0 ? spec.min_nproc : spec.nproc)},
      {"max_restarts", std::to_string(spec.max_restarts)},
      {"checkpoint_every", std::to_string(spec.job.checkpoint_every)},
      {"keep_last", std::to_string(spec.job.keep_last)},
      {"steps", std::to_string(spec.job.steps)},
      {"plan_text", spec.job.plan},
      {"global_batch", std::to_string(pinned_job(spec.job, spec.nproc).global_batch)},
      {"faults", faults},
      {"run_dir", spec.job.run_dir.string()},
      {"timeout_seconds", std::to_string(std::chrono::duration<double>(spec.job.comm_timeout).count())},
      {"heartbeat_timeout_seconds", std::to_string(std::chrono::duration<double>(spec.job.heartbeat_timeout).count())},
      {"max_same_failure", std::to_string(spec.max_same_failure)},
      {"fallback_plan_configured", std::string(fallback_plan(spec.fallback).flag)}};
  store.set_run_params(rec.run(), params);
  return rec;
}

RunRecorder::RunRecorder(db::ResultsStore& store, db::RunId run) : store_(&store), run_(run) {}

RunRecorder::RunRecorder(RunRecorder&& o) noexcept
    : store_(o.store_),
      run_(o.run_),
      finished_(o.finished_),
      pending_(std::move(o.pending_)),
      checkpoints_(std::move(o.checkpoints_)) {
  o.finished_ = true;  // the moved-from object no longer owns the run's status
}

RunRecorder::~RunRecorder() {
  if (finished_) return;
  try {
    flush();
    store_->mark_run_status(run_, db::RunStatus::kFailed, "the launcher stopped before the run finished");
  } catch (...) {}
}

void RunRecorder::add_step(const train::StepRecord& r) {
  db::StepTiming t;
  t.step = r.step;
  t.rank = r.rank;
  t.data_seconds = r.times.data_seconds;
  t.forward_seconds = r.times.forward_seconds;
  t.backward_seconds = r.times.backward_seconds;
  t.exposed_comm_seconds = r.times.exposed_comm_seconds;
  t.optimizer_seconds = r.times.optimizer_seconds;
  t.idle_seconds = r.times.idle_seconds;
  t.step_seconds = r.times.step_seconds;
  if (r.samples > 0) t.loss = r.loss_sum / static_cast<double>(r.samples);
  t.samples = r.samples;
  if (r.end_seconds > 0) t.end_seconds = r.end_seconds;
  pending_.push_back(t);
  if (pending_.size() >= 64) flush();
}

void RunRecorder::flush() {
  if (pending_.empty()) return;
  store_->add_step_timings(run_, pending_);
  pending_.clear();
}

void RunRecorder::add_checkpoint(const CheckpointReport& c) {
  const std::string path = c.path.string();
  if (!checkpoints_.insert({c.step, path}).second) {
    // A step saved again after a rollback replaced the directory: its row describes the new one.
    store_->connection()
        .statement(
            "UPDATE checkpoints SET checksum = ?, bytes = ?, save_seconds = ?, verified = 0 "
            "WHERE run_id = ? AND step = ? AND path = ?")
        .bind_all(c.checksum, static_cast<int64_t>(c.bytes), c.save_seconds, run_, c.step, path)
        .run();
    return;
  }
  db::CheckpointRecord r;
  r.step = c.step;
  r.path = path;
  r.checksum = c.checksum;
  r.bytes = static_cast<int64_t>(c.bytes);
  r.save_seconds = c.save_seconds;
  r.verified = c.verified;
  store_->add_checkpoint(run_, r);
}

void RunRecorder::checkpoint_verified(int64_t step, const std::string& path, bool verified) {
  // A checkpoint of an earlier launch in the same run dir has no row in this run.
  if (!checkpoints_.count({step, path})) return;
  store_->set_checkpoint_verified(run_, step, path, verified);
}

void RunRecorder::checkpoint_skipped(int64_t step, const std::string& path, const std::string& reason) {
  checkpoint_verified(step, path, false);
  db::IncidentRecord i;
  i.kind = db::IncidentKind::kCheckpointCorrupt;
  i.step = step;
  i.detail = "resume skipped " + path + ": " + reason;
  store_->add_incident(run_, i);
}

db::IncidentRecord to_incident_record(const IncidentReport& x) {
  db::IncidentRecord i;
  i.kind = x.kind == "killed" || x.kind == "lost"      ? db::IncidentKind::kKilled
           : x.kind == "unhealthy" || x.kind == "hang" ? db::IncidentKind::kHang
           : x.kind == "straggler"                     ? db::IncidentKind::kStraggler
                                                       : db::IncidentKind::kCrash;
  if (x.rank >= 0) i.rank = x.rank;
  i.step = x.failed_at_step;
  i.detail = x.describe();
  i.detection_seconds = x.latency.detection_seconds;
  // detected -> training again
  if (x.latency.total_seconds) i.restart_seconds = *x.latency.total_seconds - x.latency.detection_seconds.value_or(0.0);
  i.steps_lost = x.steps_lost;
  return i;
}

void RunRecorder::add_incident(const IncidentReport& incident) {
  flush();
  store_->add_incident(run_, to_incident_record(incident));
}

void RunRecorder::add_fallback(const FallbackReport& f) {
  store_->set_run_params(
      run_, std::vector<std::pair<std::string, std::string>>{{"fallback", std::string(fallback_plan(f.plan).flag)},
                                                             {"fallback_plan", std::string(fallback_plan(f.plan).name)},
                                                             {"fallback_reason", f.reason},
                                                             {"fallback_world", std::to_string(f.world_after)}});
}

// memory.rank<r>.<category>.peak_bytes / .ledger_bytes, memory.rank<r>.total.peak_bytes and
// memory.rank<r>.resident_peak_bytes, plus memory.max.<category>.peak_bytes over the ranks (what
// `parlab compare` and the splits experiment read).
void RunRecorder::record_memory(const std::vector<train::MemoryReport>& reports) {
  std::map<std::string, double> worst;
  for (const train::MemoryReport& m : reports) {
    const std::string rank = "memory.rank" + std::to_string(m.rank) + ".";
    for (int i = 0; i < model::kMemoryCategories; ++i) {
      const std::string cat(model::to_string(static_cast<model::MemoryCategory>(i)));
      store_->set_run_metric(run_, rank + cat + ".peak_bytes", static_cast<double>(m.measured_peak_bytes[i]));
      store_->set_run_metric(run_, rank + cat + ".ledger_bytes", m.ledger_bytes[i]);
      worst[cat] = std::max(worst[cat], static_cast<double>(m.measured_peak_bytes[i]));
    }
    store_->set_run_metric(run_, rank + "total.peak_bytes", static_cast<double>(m.measured_peak_total_bytes));
    store_->set_run_metric(run_, rank + "resident_peak_bytes", static_cast<double>(m.resident_peak_bytes));
    worst["total"] = std::max(worst["total"], static_cast<double>(m.measured_peak_total_bytes));
    worst["resident"] = std::max(worst["resident"], static_cast<double>(m.resident_peak_bytes));
  }
  for (const auto& [cat, v] : worst) store_->set_run_metric(run_, "memory.max." + cat + ".peak_bytes", v);
}

void RunRecorder::finish(const TrainOutcome& o) {
  flush();
  auto metric = [&](const char* key, double v) { store_->set_run_metric(run_, key, v); };
  metric("steps_completed", static_cast<double>(o.steps_completed));
  metric("attempts", o.attempts);
  metric("restarts", std::max(0, o.attempts - 1));
  metric("final_world", o.final_world);
  metric("wall_seconds", o.wall_seconds);
  if (!o.steps.empty()) {
    double step = 0, samples = 0;
    for (const StepSummary& s : o.steps) step += s.step_seconds, samples += static_cast<double>(s.global_batch);
    // The step time: the median over the steps after step 0 (a warm-up: first-touch allocation,
    // connection set-up), with its spread, so one step slowed by another job moves neither.
    std::vector<double> after_warmup;
    for (const StepSummary& s : o.steps)
      if (s.step > 0 || o.steps.size() == 1) after_warmup.push_back(s.step_seconds);
    const parlab::Spread st = parlab::spread_of(after_warmup);
    metric("step_seconds", st.median);
    metric("step_seconds_spread", st.half_iqr);
    metric("step_seconds_samples", st.n);
    if (step > 0) metric("samples_per_s", samples / step);
  }
  if (!o.checkpoints.empty()) {
    double save = 0;
    for (const CheckpointReport& c : o.checkpoints) save += c.save_seconds;
    metric("checkpoint_seconds", save / static_cast<double>(o.checkpoints.size()));
  }
  if (o.young_daly) {
    metric("young_daly_interval_seconds", o.young_daly->interval_seconds);
    metric("young_daly_interval_steps", o.young_daly->interval_steps);
  }
  double restart = 0, lost = 0;
  int timed = 0;
  for (const IncidentReport& i : o.incidents) {
    if (i.latency.total_seconds) restart += *i.latency.total_seconds, ++timed;
    lost += static_cast<double>(i.steps_lost.value_or(0));
  }
  if (timed > 0) metric("restart_total_seconds", restart / timed);
  metric("steps_lost", lost);
  if (o.final_state) store_->set_run_param(run_, "final_state_xxh3_64", o.final_state->combined_hex());
  record_memory(o.memory);
  const db::RunStatus status = o.ok            ? db::RunStatus::kCompleted
                               : o.interrupted ? db::RunStatus::kKilled
                                               : db::RunStatus::kFailed;
  store_->mark_run_status(run_, status, o.ok ? std::optional<std::string>{} : std::optional<std::string>{o.message});
  finished_ = true;
}

}  // namespace parlab::record
