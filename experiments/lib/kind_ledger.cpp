// kind = "ledger": the seed's memory ledger and its rule, recorded as an analytic run.
#include <cstdio>

#include "experiments/lib/runner.h"
#include "strategy/ledger.h"
#include "base/text_table.h"
#include "base/units.h"

namespace parlab::experiments {

void run_ledger(Context& ctx, const LedgerTask& t) {
  strategy::RuleInputs in;
  in.params_bytes = t.params_gb * units::kGB;
  in.grads_bytes = t.grads_gb * units::kGB;
  in.optimizer_bytes = t.optimizer_gb * units::kGB;
  in.activations_bytes = t.activations_gb * units::kGB;
  in.largest_layer_bytes = t.largest_layer_gb * units::kGB;
  in.device_bytes = t.device_gb * units::kGB;
  const strategy::RuleVerdict v = strategy::apply_rule(in);

  db::NewRun nr;
  nr.experiment = ctx.experiment;
  nr.kind = db::RunKind::kAnalytic;
  nr.model = "hand ledger";
  nr.cluster = "one device of " + std::to_string(t.device_gb) + " GB";
  nr.notes = "the seed's parallelism_budget.py";
  RunGuard run(ctx.store, nr, ctx.outcome);
  ctx.store.set_run_params(run.id(), std::vector<std::pair<std::string, std::string>>{
                                         {"params_gb", std::to_string(t.params_gb)},
                                         {"grads_gb", std::to_string(t.grads_gb)},
                                         {"optimizer_gb", std::to_string(t.optimizer_gb)},
                                         {"activations_gb", std::to_string(t.activations_gb)},
                                         {"largest_layer_gb", std::to_string(t.largest_layer_gb)},
                                         {"device_gb", std::to_string(t.device_gb)},
                                         {"blocker", v.blocker}});
  ctx.store.set_run_metric(run.id(), "replica_gb", v.replica_bytes / units::kGB);
  ctx.store.set_run_metric(run.id(), "ddp_fits", v.ddp_fits);
  ctx.store.set_run_metric(run.id(), "shard_model_state", v.shard_model_state);
  ctx.store.set_run_metric(run.id(), "tensor_split_needed", v.tensor_split_needed);
  ctx.store.set_run_metric(run.id(), "pipeline_candidate", v.pipeline_candidate);
  run.complete();

  auto py = [](bool b) { return b ? "True" : "False"; };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "DDP fits: %s\nshard model state: %s\ntensor split needed: %s\npipeline candidate: %s\n"
                "estimated replica GB: %g\nblocker: %s\n",
                py(v.ddp_fits), py(v.shard_model_state), py(v.tensor_split_needed), py(v.pipeline_candidate),
                v.replica_bytes / units::kGB, v.blocker.c_str());
  ctx.outcome->report = buf;
  // The worked example as evidence: the inputs, the verdict and the printed lines.
  db::ProofRecord proof;
  proof.experiment = ctx.experiment;
  proof.run = run.id();
  proof.kind = "seed_worked_example";
  proof.inputs = {{"params_gb", t.params_gb},
                  {"grads_gb", t.grads_gb},
                  {"optimizer_gb", t.optimizer_gb},
                  {"activations_gb", t.activations_gb},
                  {"largest_layer_gb", t.largest_layer_gb},
                  {"device_gb", t.device_gb}};
  proof.evidence = {{"replica_gb", v.replica_bytes / units::kGB},
                    {"ddp_fits", v.ddp_fits},
                    {"shard_model_state", v.shard_model_state},
                    {"tensor_split_needed", v.tensor_split_needed},
                    {"pipeline_candidate", v.pipeline_candidate},
                    {"blocker", v.blocker},
                    {"printed", buf}};
  proof.passed = true;  // a record of what the rule said; the grader checks it against the chapter

  std::snprintf(buf, sizeof buf, "replica %g GB vs device %g GB: DDP fits %s, blocker: %s",
                v.replica_bytes / units::kGB, t.device_gb, py(v.ddp_fits), v.blocker.c_str());
  ctx.outcome->headline = buf;
  proof.result = buf;
  ctx.store.add_proof(proof);
  ctx.outcome->ok = true;
}

}  // namespace parlab::experiments
