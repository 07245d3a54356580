#include "experiments/lib/record.h"

#include <filesystem>

#include "db/proof_chain.h"
#include "experiments/lib/fidelity.h"
#include "sim/simulate.h"
#include "strategy/io.h"

namespace parlab::experiments {
namespace {

db::StepTiming timing_of(const strategy::RankTimes& r) {
  db::StepTiming t;
  t.step = 0;
  t.rank = r.rank;
  t.forward_seconds = r.forward_seconds;
  t.backward_seconds = r.backward_seconds;
  t.optimizer_seconds = r.optimizer_seconds;
  t.exposed_comm_seconds = r.exposed_comm_seconds;
  t.idle_seconds = r.bubble_seconds;
  t.step_seconds = r.step_seconds;
  return t;
}

void record_common(db::ResultsStore& store, db::RunId run, const std::vector<strategy::RankTimes>& ranks, double step,
                   double samples_per_s, double mfu, double bubble_total) {
  std::vector<db::StepTiming> rows;
  for (const auto& r : ranks) rows.push_back(timing_of(r));
  store.add_step_timings(run, rows);
  store.set_run_metric(run, "step_seconds", step);
  store.set_run_metric(run, "samples_per_s", samples_per_s);
  store.set_run_metric(run, "mfu", mfu);
  store.set_run_metric(run, "bubble_fraction_of_total", bubble_total);
}

}  // namespace

std::string resolve_ref(const Context& ctx, const std::string& ref) {
  namespace fs = std::filesystem;
  const bool path_like = ref.find('/') != std::string::npos || ref.ends_with(".toml");
  if (!path_like || fs::path(ref).is_absolute() || fs::exists(ref)) return ref;
  const fs::path beside = fs::path(ctx.spec.file).parent_path() / ref;
  return fs::exists(beside) ? beside.string() : ref;
}

std::filesystem::path run_dir(const Context& ctx, const std::string& label) {
  const auto dir = ctx.options.work_dir / ctx.spec.name / label;
  std::filesystem::create_directories(dir);
  return dir;
}

db::NewRun new_run(const Context& ctx, db::RunKind kind, const std::string& model, const std::string& cluster,
                   const strategy::Plan& plan, uint64_t seed) {
  db::NewRun nr;
  nr.experiment = ctx.experiment;
  nr.kind = kind;
  nr.model = model;
  nr.cluster = cluster;
  nr.plan = strategy::to_json(plan);
  nr.world_size = plan.world();
  nr.seed = seed;
  return nr;
}

void record_estimate(db::ResultsStore& store, db::RunId run, const strategy::StepEstimate& e) {
  record_common(store, run, e.ranks, e.step_seconds, e.samples_per_s, e.mfu, e.bubble_fraction_of_total);
}

void record_sim(db::ResultsStore& store, db::RunId run, const sim::SimResult& r) {
  record_common(store, run, r.ranks, r.step_seconds, r.samples_per_s, r.mfu, r.bubble_fraction_of_total);
  std::vector<db::CollectiveRecord> cols;
  int64_t seq = 0;
  for (const auto& c : r.collectives) {
    db::CollectiveRecord rec;
    rec.rank = c.rank;
    rec.seq = seq++;
    rec.op = c.op;
    rec.group_name = c.group;
    rec.bytes = int64_t(c.bytes);
    rec.group_ranks = c.ranks;
    rec.start_seconds = c.start_seconds;
    rec.seconds = c.seconds;
    if (c.seconds > 0) {
      rec.algbw_bytes_per_s = c.bytes / c.seconds;
      if (auto op = strategy::parse_collective_op(c.op))
        rec.busbw_bytes_per_s = strategy::busbw_bytes_per_s(*op, c.ranks, c.bytes, c.seconds);
    }
    rec.tag = c.tag;
    cols.push_back(rec);
  }
  if (!cols.empty()) store.add_collectives(run, cols);
  store.set_run_metric(run, "simulated_messages", double(r.messages));
}

// The simulation's inputs and the digest of its JSON output: the grader re-simulates from these
// and compares the bytes (same inputs, same output is the simulator's contract).
void record_simulation_proof(Context& ctx, db::RunId run, const std::string& model_ref,
                             const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                             const strategy::Plan& plan, const sim::SimOptions& so, const sim::SimResult& r) {
  const std::string bytes = sim::to_json(r).dump();
  db::ProofRecord proof;
  proof.experiment = ctx.experiment;
  proof.run = run;
  proof.kind = "deterministic_simulation";
  proof.inputs = {{"model", resolve_ref(ctx, model_ref)},
                  {"model_digest", db::content_digest(strategy::to_json(model).dump())},
                  {"cluster_toml", strategy::cluster_to_toml(cluster, "")},
                  {"world", plan.world()},
                  {"plan", plan.to_string()},
                  {"warmup_steps", so.warmup_steps},
                  {"steps", so.steps},
                  {"timeline", so.timeline}};
  proof.evidence = {
      {"output_digest", db::content_digest(bytes)}, {"output_bytes", bytes.size()}, {"step_seconds", r.step_seconds}};
  proof.result = "simulated " + std::to_string(plan.world()) + " workers: " + format_ms(r.step_seconds) + " per step";
  proof.passed = true;  // the claim is checked by re-simulating, not by the writer
  ctx.store.add_proof(proof);
}

}  // namespace parlab::experiments
