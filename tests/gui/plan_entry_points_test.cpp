// One plan policy: the same inputs (model, plan text, workers) resolved through every entry point
// that turns them into a plan give one plan: strategy::resolve (what `parlab plan` and
// `parlab simulate` take), the planner's fixed batch, the trainer's job config (`parlab train`,
// its workers and the run recorder) and the desktop lab's series. Before, the trainer defaulted
// to mb x lcm(dp, 4), the resolver to one microbatch per replica, and the lab and the launcher
// appended ",gbs=" to the plan text to make them agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/key_values.h"
#include "gui/core/lab_setup.h"
#include "parlab/source_dir.h"
#include "runtime/launch/worker.h"
#include "strategy/io.h"
#include "strategy/plan.h"
#include "strategy/planner.h"

namespace parlab {
namespace {

// The held-out small lab network (its default microbatch, 32, is what issue 36's command tripped on).
const std::string kSmall = std::string(PARLAB_SOURCE_DIR) + "/experiments/models/lab-mlp-small.toml";

struct Case {
  std::string model, plan;
  int workers;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {kSmall, "", 1},
      {kSmall, "", 2},
      {kSmall, "", 4},
      {kSmall, "zero=3", 4},
      {kSmall, "gbs=64", 4},
      {kSmall, "tp=2", 4},
      {kSmall, "pp=2", 4},
      {kSmall, "mb=8", 2},
      {"lab-mlp", "zero=1,bucket_mb=4", 2},
      {"lab-mlp", "pp=2,tp=2", 4},
  };
  return c;
}

std::string label(const Case& c) { return c.model + " '" + c.plan + "' x" + std::to_string(c.workers); }

strategy::Plan through_resolve(const Case& c) {
  return strategy::resolve(strategy::parse_plan(c.plan), strategy::load_model(c.model), c.workers);
}

strategy::Plan through_trainer(const Case& c) {
  launch::TrainJob job;
  job.model = c.model;
  job.plan = c.plan;
  // As `parlab train` does: the job's batch is fixed by its first attempt, then resolved again.
  return launch::make_train_config(launch::pin_global_batch(job, c.workers), c.workers).plan;
}

// The lab's setup panel offers the keys of gui::setup_plan_keys() (not bucket_mb, for one).
bool lab_offers(const Case& c) {
  const std::vector<std::string>& keys = gui::setup_plan_keys();
  for (const KeyValue& kv : split_key_values(c.plan))
    if (std::find(keys.begin(), keys.end(), kv.key) == keys.end()) return false;
  return true;
}

strategy::Plan through_lab(const Case& c) {
  gui::SetupInputs in;
  in.model = c.model;
  in.workers = c.workers;
  for (const KeyValue& kv : split_key_values(c.plan)) in.set(kv.key, kv.value);
  const gui::SetupResult r = gui::resolve_setup(in);
  if (!r.setup) throw std::runtime_error("the lab refused the setup: " + (r.error ? r.error->message : std::string()));
  EXPECT_EQ(r.setup->plan.to_string(), gui::plan_at_workers(*r.setup, c.workers).to_string()) << label(c);
  return r.setup->plan;
}

TEST(PlanEntryPoints, EveryEntryPointResolvesOnePlan) {
  int through_the_lab = 0;
  for (const Case& c : cases()) {
    const strategy::Plan want = through_resolve(c);
    EXPECT_EQ(through_trainer(c).to_string(), want.to_string()) << label(c);
    if (!lab_offers(c)) continue;
    EXPECT_EQ(through_lab(c).to_string(), want.to_string()) << label(c);
    ++through_the_lab;
  }
  EXPECT_GE(through_the_lab, 8);
}

// The planner holds one global batch over its candidates: unset, it is the policy's batch for the
// world as one data-parallel group, which is what the trainer runs as DDP on that world.
TEST(PlanEntryPoints, PlannerHoldsThePolicysBatch) {
  for (int w : {1, 2, 4}) {
    const Case ddp{kSmall, "", w};
    strategy::PlannerOptions o;
    o.top = 1;
    const strategy::PlanReport rep = strategy::search_plans(
        strategy::load_model(ddp.model), strategy::with_world(strategy::load_cluster("cpu-local"), w), o);
    EXPECT_EQ(rep.global_batch, through_trainer(ddp).global_batch) << w << " workers";
    EXPECT_EQ(rep.global_batch, through_resolve(ddp).global_batch) << w << " workers";
  }
}

// Issue 36's refused command: `parlab train --nproc 4 --model experiments/models/lab-mlp-small.toml --plan gbs=64`.
TEST(PlanEntryPoints, TrainerTakesAGlobalBatchWithoutAMicrobatch) {
  const strategy::Plan p = through_trainer({kSmall, "gbs=64", 4});
  EXPECT_EQ(p.global_batch, 64);
  EXPECT_EQ(p.microbatch * p.microbatches * p.dp, 64);
}

// A job keeps its first attempt's batch when the world shrinks (elastic restart on 3 of 4).
TEST(PlanEntryPoints, PinnedBatchSurvivesAShrunkenWorld) {
  launch::TrainJob job;
  job.model = kSmall;
  const launch::TrainJob pinned = launch::pin_global_batch(job, 4);
  EXPECT_GT(pinned.global_batch, 0);
  EXPECT_EQ(pinned.plan, job.plan) << "the plan text is the user's, never edited";
  EXPECT_EQ(launch::make_train_config(pinned, 2).plan.global_batch, pinned.global_batch);
  const nlohmann::json j = launch::to_json(pinned);
  EXPECT_EQ(launch::train_job_from_json(j).global_batch, pinned.global_batch);
}

}  // namespace
}  // namespace parlab
