// Experiment definitions: every shipped file parses; bad keys and values are named.
#include <gtest/gtest.h>

#include <filesystem>

#include "experiments/lib/spec.h"
#include "base/errors.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace {

std::string field_of(const std::string& text) {
  try {
    parse_experiment(text, "x.toml");
  } catch (const ConfigError& e) {
    return e.field();
  }
  return "(accepted)";
}

}  // namespace

TEST(ExperimentSpec, EveryShippedExperimentParses) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(PARLAB_SOURCE_DIR) / "experiments")) {
    if (e.path().extension() != ".toml") continue;
    const ExperimentSpec s = load_experiment(e.path());
    EXPECT_EQ(s.name, e.path().stem().string());
    EXPECT_FALSE(s.notice.empty()) << s.name << ": say what a learner should notice";
    ++n;
  }
  EXPECT_GE(n, 6);
}

TEST(ExperimentSpec, ParsesAScalingExperiment) {
  const auto s = parse_experiment(
      "name = \"s\"\nkind = \"scaling\"\n[scaling]\nmodel = \"lab-mlp\"\nworkers = [1, 2]\nsteps = 3\n"
      "sources = [\"analytic\", \"measured\"]\nplan = \"gbs=128\"\n",
      "s.toml");
  const auto& t = std::get<ScalingTask>(s.task);
  EXPECT_EQ(t.workers, (std::vector<int>{1, 2}));
  EXPECT_EQ(t.steps, 3);
  EXPECT_EQ(t.sources, (std::vector<Source>{Source::kAnalytic, Source::kMeasured}));
  EXPECT_EQ(t.plan, "gbs=128");
  EXPECT_EQ(t.cluster, "cpu-local");
}

TEST(ExperimentSpec, ParsesASplitsExperimentAndEquivalencePlans) {
  const auto s = parse_experiment(
      "name = \"s\"\nkind = \"splits\"\n[splits]\nmodel = \"m.toml\"\nworkers = 2\n"
      "plans = [\"zero=0\", \"zero=3\"]\nsources = [\"analytic\"]\n",
      "s.toml");
  const auto& t = std::get<SplitsTask>(s.task);
  EXPECT_EQ(t.workers, 2);
  EXPECT_EQ(t.plans, (std::vector<std::string>{"zero=0", "zero=3"}));
  EXPECT_EQ(t.sources, std::vector<Source>{Source::kAnalytic});
  EXPECT_EQ(t.rounds, 1);
  EXPECT_EQ(field_of("kind = \"splits\"\n[splits]\nrounds = 21\n"), "x.toml: splits.rounds");
  const auto e = parse_experiment("kind = \"equivalence\"\n[equivalence]\nplans = [\"\", \"zero=2\"]\n", "e.toml");
  EXPECT_EQ(std::get<EquivalenceTask>(e.task).plans, (std::vector<std::string>{"", "zero=2"}));
}

TEST(ExperimentSpec, BadKeysAndValuesAreNamed) {
  EXPECT_EQ(field_of("kind = \"ledger\"\n[ledger]\nparams_gb=1\ngrads_gb=1\noptimizer_gb=1\nactivations_gb=1\n"
                     "largest_layer_gb=1\ndevice_gb=8\n"),
            "(accepted)");
  EXPECT_EQ(field_of("kind = \"ledger\"\n[ledger]\nparams_gb=1\n"), "x.toml: ledger.grads_gb");
  EXPECT_EQ(field_of("kind = \"scaling\"\n[scaling]\nworkerz = [1]\n"), "x.toml: scaling.workerz");
  EXPECT_EQ(field_of("kind = \"scaling\"\n[scaling]\nworkers = [0, 2]\n"), "x.toml: scaling.workers");
  EXPECT_EQ(field_of("kind = \"scaling\"\n[scaling]\nsources = [\"guessed\"]\n"), "x.toml: scaling.sources");
  EXPECT_EQ(field_of("kind = \"scaling\"\n[scaling]\nsteps = -1\n"), "x.toml: scaling.steps");
  EXPECT_EQ(field_of("kind = \"scaling\"\ncolour = \"red\"\n"), "x.toml: colour");
  EXPECT_EQ(field_of("kind = \"juggling\"\n"), "x.toml: kind");
  EXPECT_EQ(field_of("name = \"x\"\n"), "x.toml: kind");
  EXPECT_EQ(field_of("kind = \"equivalence\"\n[equivalence]\nworkers = [2, 4]\n"), "x.toml: equivalence.workers");
  EXPECT_EQ(field_of("kind = \"scaling_lab\"\n[scaling_lab]\ncompute_ms = 0\n"), "x.toml: scaling_lab.compute_ms");
  EXPECT_EQ(field_of("kind = \"planner\"\n[planner]\nsimulate_top = -2\n"), "x.toml: planner.simulate_top");
  EXPECT_EQ(field_of("kind = \"splits\"\n[splits]\nplans = [3]\n"), "x.toml: splits.plans");
  EXPECT_EQ(field_of("kind = \"splits\"\n[splits]\nworkers = 0\n"), "x.toml: splits.workers");
  EXPECT_EQ(field_of("kind = \"equivalence\"\n[equivalence]\nplans = []\n"), "x.toml: equivalence.plans");
  EXPECT_EQ(field_of("kind = = 3\n").substr(0, 7), "x.toml:");
  EXPECT_EQ(field_of("kind = \"hang_drill\"\n[hang_drill]\nfault = \"kill:rank=1,step=3\"\n"),
            "x.toml: hang_drill.fault");
  EXPECT_EQ(field_of("kind = \"hang_drill\"\n[hang_drill]\nfault = \"hang:rank=5,step=3\"\n"),
            "x.toml: hang_drill.fault");
  EXPECT_EQ(field_of("kind = \"hang_drill\"\n[hang_drill]\nfault = \"hang:step=3\"\n"), "x.toml: hang_drill.fault");
  EXPECT_EQ(field_of("kind = \"hang_drill\"\n[hang_drill]\nfallback = \"pray\"\n"), "x.toml: hang_drill.fallback");
  EXPECT_EQ(field_of("kind = \"hang_drill\"\n[hang_drill]\nnproc = 1\n"), "x.toml: hang_drill.nproc");
  EXPECT_EQ(field_of("kind = \"elastic\"\n[elastic]\nlose_rank = 2\n"), "x.toml: elastic.lose_rank");
  EXPECT_EQ(field_of("kind = \"elastic\"\n[elastic]\nsteps = 6\nlose_step = 6\n"), "x.toml: elastic.lose_step");
}

// The keys shared by every kind are read by one helper each: a negative seed (which used to wrap to
// 2^64 - 1 in some kinds) and an unknown key are refused in every kind that has them, by name.
TEST(ExperimentSpec, EveryKindRefusesANegativeSeedAndAnUnknownKey) {
  for (const std::string kind : {"scaling", "equivalence", "kill_resume", "splits", "hang_drill", "elastic"}) {
    EXPECT_EQ(field_of("kind = \"" + kind + "\"\n[" + kind + "]\nseed = -1\n"), "x.toml: " + kind + ".seed") << kind;
    EXPECT_EQ(field_of("kind = \"" + kind + "\"\n[" + kind + "]\nseeds = 1\n"), "x.toml: " + kind + ".seeds") << kind;
  }
  const auto s = parse_experiment("kind = \"scaling\"\n[scaling]\nrounds = 3\nseed = 7\n", "s.toml");
  EXPECT_EQ(std::get<ScalingTask>(s.task).rounds, 3);
  EXPECT_EQ(std::get<ScalingTask>(s.task).seed, 7u);
  const auto h =
      parse_experiment("kind = \"hang_drill\"\n[hang_drill]\nnproc = 3\nsteps = 5\nplan = \"gbs=6\"\n", "h.toml");
  EXPECT_EQ(std::get<HangDrillTask>(h.task).nproc, 3);
  EXPECT_EQ(std::get<HangDrillTask>(h.task).steps, 5);
  EXPECT_EQ(std::get<HangDrillTask>(h.task).plan, "gbs=6");
}

TEST(ExperimentSpec, DeviceKeyOfMeasuredKinds) {
  const auto k = parse_experiment("kind = \"kill_resume\"\n[kill_resume]\ndevice = \"cuda\"\n", "k.toml");
  EXPECT_EQ(std::get<KillResumeTask>(k.task).device, "cuda");
  const auto e = parse_experiment("kind = \"equivalence\"\n[equivalence]\n", "e.toml");
  EXPECT_EQ(std::get<EquivalenceTask>(e.task).device, "cpu");
  EXPECT_EQ(field_of("kind = \"equivalence\"\n[equivalence]\ndevice = \"tpu\"\n"), "x.toml: equivalence.device");
  EXPECT_EQ(field_of("kind = \"kill_resume\"\n[kill_resume]\ndevice = \"gpu\"\n"), "x.toml: kill_resume.device");
}

}  // namespace parlab::experiments

namespace parlab::experiments {

TEST(ExperimentSpec, DecideExperimentKeysAndTheirLimits) {
  const auto d = parse_experiment(
      "kind = \"decide\"\n[decide]\nmodel = \"models/deep-mlp.toml\"\nworkers = 3\ngbs = 48\n"
      "top = 4\nsteps = 5\nseed = 9\n",
      "d.toml");
  const auto& t = std::get<DecideTask>(d.task);
  EXPECT_EQ(d.kind, "decide");
  EXPECT_EQ(t.model, "models/deep-mlp.toml");
  EXPECT_EQ(t.cluster, "cpu-local");
  EXPECT_EQ(t.workers, 3);
  EXPECT_EQ(t.global_batch, 48);
  EXPECT_EQ(t.top, 4);
  EXPECT_EQ(t.steps, 5);
  EXPECT_EQ(t.seed, 9u);
  EXPECT_EQ(std::get<DecideTask>(parse_experiment("kind = \"decide\"\n", "d.toml").task).global_batch,
            0);  // the planner's
  // One worker has nothing to split; a GPU cluster cannot be measured here; top and gbs bounded.
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\nworkers = 1\n"), "x.toml: decide.workers");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\ncluster = \"dgx-a100\"\n"), "x.toml: decide.cluster");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\ncluster = \"my/cpu.toml\"\n"), "(accepted)");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\ntop = 0\n"), "x.toml: decide.top");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\ntop = 17\n"), "x.toml: decide.top");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\ngbs = 0\n"), "x.toml: decide.gbs");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\nplans = [\"zero=1\"]\n"), "x.toml: decide.plans");
  EXPECT_EQ(field_of("kind = \"decide\"\n[decide]\nrounds = 0\n"), "x.toml: decide.rounds");
  EXPECT_EQ(std::get<DecideTask>(parse_experiment("kind = \"decide\"\n[decide]\nrounds = 3\n", "d.toml").task).rounds,
            3);
  EXPECT_NE(experiment_kinds().find("decide [model, cluster, workers, gbs, top, steps, seed, rounds]"),
            std::string::npos);
}

}  // namespace parlab::experiments
