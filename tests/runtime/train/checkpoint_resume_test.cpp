// The trainer's complete state through a checkpoint, with ranks as threads over real Gloo
// communicators: a resumed run continues bit-identically (parameters AND optimizer state), a torn
// or corrupt newest checkpoint falls back to the previous good one through the trainer's resume
// path, a checkpoint of N workers resumes with M (2 -> 1 -> 2) without skipping or repeating a
// sample, and a checkpoint of another job is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/export.h"
#include "runtime/train/trainer_checkpoint.h"
#include "train_fixture.h"

namespace parlab::train {
namespace {

namespace fs = std::filesystem;
using testing::tiny_config;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("parlab_ckpt_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// What one rank ended with: every tensor of the state, and the sample indices of its steps.
struct RankEnd {
  std::map<std::string, std::vector<float>> tensors;  // parameters and optimizer buffers
  StateFingerprint fingerprint;
  std::vector<StepRecord> records;
  ResumeResult resume;
};

// How a segment of training runs on each of `world` threads: optionally resume from `root`,
// train until `until` steps in total, optionally save.
struct Segment {
  int world = 1;
  int64_t until = 0;
  bool resume = false;
  bool save = false;
  fs::path root{};
  checkpoint::SaveHook hook{};
};

// Parameters whole (gathered under ZeRO-3: a collective) and this rank's optimizer buffers.
std::map<std::string, std::vector<float>> tensors_of(const Trainer& t) {
  std::map<std::string, std::vector<float>> out;
  const model::LabMlp& m = t.state().model;
  const std::vector<float> params = gather_full_params(t);
  for (const model::ParamTensor& p : m.layout().tensors())
    out[p.name].assign(params.begin() + p.offset, params.begin() + p.offset + p.numel);
  for (const std::string& b : t.state().optimizer->buffer_names()) {
    const auto v = t.state().optimizer->buffer(b);
    out["optimizer." + b].assign(v.begin(), v.end());
  }
  return out;
}

// Runs one segment; a rank that throws reports it (the save-failure test expects throws).
std::vector<RankEnd> run_segment(const std::string& plan, const Segment& seg, int64_t data_size, OptimizerConfig opt,
                                 std::vector<std::string>* errors = nullptr) {
  const TrainConfig config = tiny_config(plan, seg.world, data_size, opt);
  auto store = comm::make_in_process_store();
  std::vector<RankEnd> out(seg.world);
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int r = 0; r < seg.world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = testing::kTestTimeout;
        auto c = comm::make_gloo_communicator(store, r, seg.world, go);
        TrainerOptions to;
        to.record_events = false;
        to.record_samples = true;
        Trainer trainer(config, *c, to);
        CommCoordinator coord(*c, testing::kTestTimeout);
        if (seg.resume) out[r].resume = resume_trainer(trainer, checkpoint::LoadOptions(seg.root), coord);
        while (trainer.state().step < seg.until) out[r].records.push_back(trainer.step());
        if (seg.save) save_trainer(trainer, checkpoint::SaveOptions(seg.root, 3, seg.hook), coord);
        out[r].tensors = tensors_of(trainer);
        out[r].fingerprint = state_fingerprint(trainer);
        c->barrier()->wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (errors)
    *errors = failures;
  else
    for (const auto& f : failures) ADD_FAILURE() << f;
  return out;
}

void expect_bit_identical(const RankEnd& got, const RankEnd& want, const std::string& what) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << what;
  for (const auto& [name, values] : want.tensors) {
    const auto it = got.tensors.find(name);
    ASSERT_NE(it, got.tensors.end()) << what << ": missing " << name;
    size_t differ = 0;
    for (size_t i = 0; i < values.size(); ++i) differ += it->second[i] != values[i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << what << ": " << name << " differs in " << differ << " of " << values.size() << " elements";
  }
  EXPECT_EQ(got.fingerprint.combined_hex(), want.fingerprint.combined_hex()) << what;
}

constexpr const char* kPlan2 = "gbs=16,mb=4";
constexpr int64_t kData = 40;  // 16-sample batches: epochs of 3 steps (16, 16, 8)

class ResumeTest : public ::testing::TestWithParam<int> {};  // world size

TEST_P(ResumeTest, SaveLoadContinueIsBitIdenticalForSgdAndAdamW) {
  const int world = GetParam();
  for (const OptimizerConfig& opt :
       {OptimizerConfig{SgdConfig{.lr = 0.1, .momentum = 0.9}}, OptimizerConfig{AdamWConfig{.lr = 1e-2}}}) {
    const std::string name = std::holds_alternative<SgdConfig>(opt) ? "sgd" : "adamw";
    const fs::path root = fresh_dir("roundtrip_" + name + std::to_string(world));
    const auto whole = run_segment(kPlan2, {.world = world, .until = 7}, kData, opt);
    run_segment(kPlan2, {.world = world, .until = 4, .save = true, .root = root}, kData, opt);
    const auto resumed = run_segment(kPlan2, {.world = world, .until = 7, .resume = true, .root = root}, kData, opt);
    ASSERT_TRUE(resumed[0].resume.resumed) << resumed[0].resume.summary();
    EXPECT_EQ(resumed[0].resume.step, 4);
    EXPECT_EQ(resumed[0].records.size(), 3u);  // steps 4, 5, 6 only
    for (int r = 0; r < world; ++r) expect_bit_identical(resumed[r], whole[r], name + " rank " + std::to_string(r));
    // Optimizer step counter: AdamW's bias correction would differ otherwise; checked directly too.
    EXPECT_EQ(resumed[0].fingerprint.optimizer_step, 7);
    fs::remove_all(root);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ResumeTest, ::testing::Values(1, 2));

TEST(ResumeFallbackTest, TornSaveAndCorruptByteFallBackToThePreviousGoodCheckpoint) {
  const OptimizerConfig opt = SgdConfig{.lr = 0.1, .momentum = 0.9};
  const fs::path root = fresh_dir("fallback");
  const auto whole = run_segment(kPlan2, {.world = 2, .until = 6}, kData, opt);

  // Step 2 saved; step 4's save torn: rank 1 "crashes" half-way through writing its shard.
  run_segment(kPlan2, {.world = 2, .until = 2, .save = true, .root = root}, kData, opt);
  std::vector<std::string> errors;
  const checkpoint::SaveHook tear = [](checkpoint::SavePhase p, int rank) {
    if (p == checkpoint::SavePhase::kMidShardWrite && rank == 1) throw RuntimeError("power cut");
  };
  run_segment(kPlan2, {.world = 2, .until = 4, .resume = true, .save = true, .root = root, .hook = tear}, kData, opt,
              &errors);
  EXPECT_EQ(errors.size(), 2u) << "every rank leaves the failed save";
  // A save that fails by an exception (the real one: ENOSPC) removes its partial directory; a
  // process killed mid-save leaves it, and the loader skips it (checkpoint crash tests).
  EXPECT_FALSE(fs::exists(root / "step-000004.tmp"));
  auto r = run_segment(kPlan2, {.world = 2, .until = 6, .resume = true, .root = root}, kData, opt);
  EXPECT_EQ(r[0].resume.step, 2) << r[0].resume.summary();
  EXPECT_TRUE(r[0].resume.load.skipped.empty()) << r[0].resume.summary();
  for (int k = 0; k < 2; ++k) expect_bit_identical(r[k], whole[k], "after the torn save, rank " + std::to_string(k));

  // Now save step 4 properly, flip one byte of rank 1's shard: the resume must skip it, say why,
  // and still end bit-identical.
  run_segment(kPlan2, {.world = 2, .until = 4, .resume = true, .save = true, .root = root}, kData, opt);
  checkpoint::corrupt_byte(root / "step-000004" / checkpoint::shard_file_name(1));
  r = run_segment(kPlan2, {.world = 2, .until = 6, .resume = true, .root = root}, kData, opt);
  EXPECT_EQ(r[0].resume.step, 2) << r[0].resume.summary();
  EXPECT_NE(r[0].resume.summary().find("skipped step 4: checksum mismatch in rank-00001.safetensors"),
            std::string::npos)
      << r[0].resume.summary();
  for (int k = 0; k < 2; ++k) expect_bit_identical(r[k], whole[k], "after the corrupt byte, rank " + std::to_string(k));
  fs::remove_all(root);
}

// Every epoch is a permutation of [0, N): the sample order the elastic sampler promises,
// recomputed here from the shuffle alone (epoch_order), independent of any rank split.
TEST(ReshardTest, TwoToOneToTwoKeepsEveryTensorAndTheSampleOrder) {
  const OptimizerConfig opt = AdamWConfig{.lr = 1e-2};
  const fs::path root = fresh_dir("reshard");
  const auto a = run_segment(kPlan2, {.world = 2, .until = 4, .save = true, .root = root}, kData, opt);
  const auto b = run_segment(kPlan2, {.world = 1, .until = 4, .resume = true, .root = root}, kData, opt);
  // Nothing trained yet in b: it holds exactly what 2 workers saved, every tensor, every bit.
  EXPECT_EQ(b[0].resume.written_by_world, 2);
  expect_bit_identical(b[0], a[0], "2 -> 1 load");
  const auto c = run_segment(kPlan2, {.world = 1, .until = 7, .resume = true, .save = true, .root = root}, kData, opt);
  const auto d = run_segment(kPlan2, {.world = 2, .until = 10, .resume = true, .root = root}, kData, opt);
  EXPECT_EQ(d[0].resume.written_by_world, 1);
  EXPECT_EQ(d[0].resume.step, 7);

  // Samples of each step, over all ranks, in rank order = the batch's order.
  std::map<int64_t, std::vector<int64_t>> by_step;
  for (const auto* seg : {&a, &c, &d})
    for (const RankEnd& r : *seg)
      for (const StepRecord& rec : r.records) {
        auto& v = by_step[rec.step];
        v.insert(v.end(), rec.sample_indices.begin(), rec.sample_indices.end());
      }
  ASSERT_EQ(by_step.size(), 10u);
  std::vector<int64_t> seen;
  for (const auto& [step, v] : by_step) seen.insert(seen.end(), v.begin(), v.end());
  // 10 steps of 16, 16, 8 (N = 40, G = 16): epochs 0, 1, 2 complete (120 samples), then 16 of
  // epoch 3: 136 samples, in exactly the shuffled order.
  std::vector<int64_t> expected;
  for (int64_t e = 0; e < 4; ++e) {
    const std::vector<int64_t> order = epoch_order(7, e, kData);  // tiny_config's seed
    expected.insert(expected.end(), order.begin(), order.end());
  }
  expected.resize(136);
  EXPECT_EQ(seen, expected);
  for (int64_t e = 0; e < 3; ++e) {
    const std::set<int64_t> epoch(seen.begin() + e * kData, seen.begin() + (e + 1) * kData);
    EXPECT_EQ(epoch.size(), static_cast<size_t>(kData)) << "epoch " << e << " skipped or repeated a sample";
  }

  // The final state is the uninterrupted 2-worker run's up to summation order (fp32).
  const auto whole = run_segment(kPlan2, {.world = 2, .until = 10}, kData, opt);
  for (const auto& [name, values] : whole[0].tensors)
    EXPECT_LE(testing::relative_diff(d[0].tensors.at(name), values), 1e-4) << name;
  fs::remove_all(root);
}

TEST(ResumeRefusalTest, ACheckpointOfAnotherJobIsRefused) {
  const OptimizerConfig opt = SgdConfig{.lr = 0.1};
  const fs::path root = fresh_dir("refuse");
  run_segment(kPlan2, {.world = 1, .until = 2, .save = true, .root = root}, kData, opt);
  TrainConfig other = tiny_config(kPlan2, 1, kData, opt);
  other.seed = 8;  // the checkpoint's job used 7
  comm::GlooOptions go;
  auto c = comm::make_gloo_communicator(comm::make_in_process_store(), 0, 1, go);
  Trainer t(other, *c);
  CommCoordinator coord(*c, testing::kTestTimeout);
  try {
    resume_trainer(t, checkpoint::LoadOptions(root), coord);
    ADD_FAILURE() << "resumed another job's checkpoint";
  } catch (const CheckpointMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("seed 7"), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

// Resharding across splits: a checkpoint of ZeRO-3 on 4 workers (each file holds the pieces of
// one rank's shard) resumes as ZeRO-3 on 4 bit-identically, and as ZeRO-1 on 2, DDP on 4, DDP on
// 2 and 1 worker with the same state (the fingerprint gathers the shards, so it does not depend
// on the split), continuing to within fp32 summation order of the uninterrupted run.
TEST(ReshardTest, ZeroThreeOnFourResumesUnderEverySplit) {
  const OptimizerConfig opt = AdamWConfig{.lr = 1e-2};
  const std::string zero3 = "gbs=16,mb=4,bucket_mb=0.008,zero=3";
  const fs::path root = fresh_dir("reshard");
  const auto whole = run_segment(zero3, {.world = 4, .until = 6}, kData, opt);
  const auto saved = run_segment(zero3, {.world = 4, .until = 3, .save = true, .root = root}, kData, opt);
  {
    const checkpoint::LoadResult r = checkpoint::load_checkpoint(checkpoint::LoadOptions(root));
    ASSERT_TRUE(r.checkpoint);
    EXPECT_EQ(r.checkpoint->manifest().world_size, 4);
    EXPECT_EQ(state_fingerprint(r.checkpoint->read_all()).combined_hex(), saved[0].fingerprint.combined_hex())
        << "the shards' files together must hold exactly the gathered state";
  }
  const auto same = run_segment(zero3, {.world = 4, .until = 6, .resume = true, .root = root}, kData, opt);
  for (int r = 0; r < 4; ++r) expect_bit_identical(same[r], whole[r], "zero=3 on 4 resumed, rank " + std::to_string(r));

  struct Split {
    std::string plan;
    int world;
  };
  for (const Split& split : {Split{"gbs=16,mb=4,bucket_mb=0.008,zero=1", 2}, Split{"gbs=16,mb=4", 4},
                             Split{"gbs=16,mb=4", 2}, Split{"gbs=16,mb=4", 1}}) {
    const std::string what = split.plan + " on " + std::to_string(split.world);
    // Loaded, not stepped: exactly the state that was saved.
    const auto loaded =
        run_segment(split.plan, {.world = split.world, .until = 3, .resume = true, .root = root}, kData, opt);
    ASSERT_TRUE(loaded[0].resume.resumed) << what << ": " << loaded[0].resume.summary();
    EXPECT_EQ(loaded[0].fingerprint.combined_hex(), saved[0].fingerprint.combined_hex()) << what;
    // Stepped on: the same training within fp32 summation order.
    const fs::path copy = fresh_dir("reshard_copy");
    fs::copy(root, copy, fs::copy_options::recursive);
    const auto cont =
        run_segment(split.plan, {.world = split.world, .until = 6, .resume = true, .root = copy}, kData, opt);
    for (const auto& [name, values] : whole[0].tensors) {
      if (name.rfind("optimizer.", 0) == 0) continue;
      EXPECT_LE(testing::relative_diff(cont[0].tensors.at(name), values), 1e-5) << what << ": " << name;
    }
    fs::remove_all(copy);
  }
  fs::remove_all(root);
}

TEST(FingerprintTest, ALiveTrainerAndItsCheckpointHaveTheSameFingerprint) {
  const fs::path root = fresh_dir("fingerprint");
  const auto a =
      run_segment(kPlan2, {.world = 2, .until = 3, .save = true, .root = root}, kData, AdamWConfig{.lr = 1e-2});
  const checkpoint::LoadResult r = checkpoint::load_checkpoint(checkpoint::LoadOptions(root));
  ASSERT_TRUE(r.checkpoint);
  EXPECT_EQ(r.checkpoint->manifest().world_size, 2);  // two shards, one per rank
  const StateFingerprint f = state_fingerprint(r.checkpoint->read_all());
  EXPECT_EQ(f.combined_hex(), a[0].fingerprint.combined_hex());
  // Parameters, then the two AdamW moments of each: 6 tensors x 3 for 2 blocks + head.
  EXPECT_EQ(f.tensors.size(), 3u * (4 * 2 + 2));
  EXPECT_EQ(StateFingerprint::from_json(f.to_json()).combined, f.combined);
  fs::remove_all(root);
}

TEST(CommCoordinatorTest, AllGatherOfStringsOfAnyLength) {
  constexpr int kWorld = 3;
  auto store = comm::make_in_process_store();
  std::vector<std::vector<std::string>> got(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] {
      auto c = comm::make_gloo_communicator(store, r, kWorld, {});
      CommCoordinator coord(*c, testing::kTestTimeout);
      // Lengths 0, 5 and 11 (not multiples of a float), with a NUL byte inside.
      const std::string mine = r == 0 ? "" : r == 1 ? std::string("ab\0de", 5) : "rank two!!!";
      got[r] = coord.all_gather(mine);
      coord.barrier();
      got[r].push_back(coord.all_gather("x")[2]);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(got[r].size(), 4u);
    EXPECT_EQ(got[r][0], "");
    EXPECT_EQ(got[r][1], std::string("ab\0de", 5));
    EXPECT_EQ(got[r][2], "rank two!!!");
    EXPECT_EQ(got[r][3], "x");
  }
}

}  // namespace
}  // namespace parlab::train
