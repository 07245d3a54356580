// A crash at any point of a save leaves the previous checkpoint loadable and never a torn one;
// damaged checkpoints are named, with the file and both checksums, and skipped.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "tests/runtime/checkpoint/test_util.h"

namespace parlab::checkpoint {
namespace {

using nlohmann::json;
using testing::make_state;
using testing::run_ranks;
using testing::ScratchDir;

struct SimulatedCrash : std::runtime_error {
  SimulatedCrash() : std::runtime_error("simulated crash") {}
};

constexpr int kWorld = 2;

void save_replicas(const std::filesystem::path& root, const TrainingState& s, SaveHook hook = {}) {
  run_ranks(kWorld, [&](Coordinator& c) {
    const auto slices = replica_share(s, kWorld, c.rank());
    save_checkpoint({root, 3, hook}, s.step, slices, s.metadata, c);
  });
}

std::string pointer(const std::filesystem::path& root, const char* name) {
  std::ifstream in(root / name);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string file_hash_hex(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return hex;
}

struct CrashCase {
  SavePhase phase;
  int crashing_rank;
  bool new_checkpoint_survives;  // the crash came after the commit (the rename)
};

class CrashDuringSave : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashDuringSave, LoadFindsACompleteCheckpoint) {
  const CrashCase cc = GetParam();
  ScratchDir dir;
  const TrainingState old_state = make_state(120, /*salt=*/0);
  const TrainingState new_state = make_state(140, /*salt=*/7);
  save_replicas(dir.path(), old_state);

  SaveHook crash = [&](SavePhase p, int rank) {
    if (p == cc.phase && rank == cc.crashing_rank) throw SimulatedCrash();
  };
  EXPECT_ANY_THROW(save_replicas(dir.path(), new_state, crash));

  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint) << r.summary();
  if (cc.new_checkpoint_survives) {
    EXPECT_EQ(r.checkpoint->step(), 140) << r.summary();
    testing::expect_same_state(new_state, r.checkpoint->read_all());
    EXPECT_TRUE(r.skipped.empty()) << r.summary();
  } else {
    EXPECT_EQ(r.checkpoint->step(), 120) << r.summary();
    testing::expect_same_state(old_state, r.checkpoint->read_all());
    // A save that fails by an exception removes its partial directory (a full disk must get its
    // space back); the torn directory a killed process leaves is ChildProcessKilledMidWrite's.
    EXPECT_TRUE(r.skipped.empty()) << r.summary();
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000140.tmp"));
    EXPECT_EQ(pointer(dir.path(), "latest"), "step-000120\n");
  }
  if (cc.phase == SavePhase::kBeforePointerUpdate) {
    // Committed but the pointer never moved: used, and the lag is reported.
    EXPECT_EQ(pointer(dir.path(), "latest"), "step-000120\n");
    ASSERT_FALSE(r.notes.empty());
    EXPECT_NE(r.notes[0].find("step-000120"), std::string::npos) << r.notes[0];
  }

  // The next save succeeds and tidies the torn directory away.
  save_replicas(dir.path(), make_state(160));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000140.tmp"));
  EXPECT_EQ(load_checkpoint({dir.path()}).checkpoint->step(), 160);
}

INSTANTIATE_TEST_SUITE_P(Phases, CrashDuringSave,
                         ::testing::Values(CrashCase{SavePhase::kMidShardWrite, 1, false},
                                           CrashCase{SavePhase::kAfterShardWrite, 0, false},
                                           CrashCase{SavePhase::kBeforeManifest, 0, false},
                                           CrashCase{SavePhase::kBeforeRename, 0, false},
                                           CrashCase{SavePhase::kBeforePointerUpdate, 0, true},
                                           CrashCase{SavePhase::kAfterPointerUpdate, 0, true}),
                         [](const auto& info) {
                           std::string s = save_phase_name(info.param.phase);
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

// A real process, killed with SIGKILL while its shard is half written: no destructors, no
// exception handlers, exactly what a power cut or the OOM killer does to the process.
TEST(CrashDuringSave, ChildProcessKilledMidWrite) {
  ScratchDir dir;
  const TrainingState old_state = make_state(120);
  save_checkpoint({dir.path()}, old_state);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    SaveOptions o{dir.path()};
    o.max_chunk_bytes = 64;  // many chunks, so "half written" is mid-file
    o.hook = [&](SavePhase p, int) {
      if (p != SavePhase::kMidShardWrite) return;
      const char c = 'x';
      (void)!::write(ready[1], &c, 1);
      for (;;) ::pause();  // wait to be killed
    };
    try {
      save_checkpoint(o, make_state(140, 7));
    } catch (...) {}
    ::_exit(3);  // not reached when the hook fired
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "child never reached the middle of its shard";
  ::close(ready[0]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // The torn shard is on disk, in a directory that was never committed.
  const auto torn = dir.path() / "step-000140.tmp" / "rank-00000.safetensors";
  ASSERT_TRUE(std::filesystem::exists(torn));
  EXPECT_THROW(SafetensorsFile::open(torn), SafetensorsError) << "the shard really is half written";

  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint) << r.summary();
  EXPECT_EQ(r.checkpoint->step(), 120);
  testing::expect_same_state(old_state, r.checkpoint->read_all());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].step, 140);
}

TEST(Corruption, OneFlippedByteIsNamedAndThePreviousCheckpointUsed) {
  ScratchDir dir;
  const TrainingState old_state = make_state(120);
  save_replicas(dir.path(), old_state);
  save_replicas(dir.path(), make_state(140, 7));

  const auto victim = dir.path() / "step-000140" / "rank-00001.safetensors";
  std::ifstream mf(dir.path() / "step-000140" / "manifest.json");
  const std::string expected = json::parse(mf)["files"][1]["xxh3_64"].get<std::string>();
  corrupt_byte(victim);
  const std::string actual = file_hash_hex(victim);
  ASSERT_NE(actual, expected);

  // Three ranks share the verification; only rank 1 hashes file 1, yet all must agree.
  run_ranks(3, [&](Coordinator& c) {
    LoadResult r = load_checkpoint({dir.path()}, c);
    ASSERT_TRUE(r.checkpoint) << r.summary();
    EXPECT_EQ(r.checkpoint->step(), 120);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].step, 140);
    EXPECT_EQ(r.skipped[0].reason,
              "checksum mismatch in rank-00001.safetensors: expected xxh3_64 " + expected + ", actual " + actual);
    testing::expect_same_state(old_state, r.checkpoint->read_all());
  });
  EXPECT_EQ(pointer(dir.path(), "last-known-good"), "step-000120\n");
}

TEST(Corruption, TruncatedMissingAndGarbledFilesAreNamed) {
  ScratchDir dir;
  for (int64_t step : {120, 140, 160}) save_replicas(dir.path(), make_state(step));
  const auto d120 = dir.path() / "step-000120", d140 = dir.path() / "step-000140", d160 = dir.path() / "step-000160";
  std::filesystem::resize_file(d160 / "rank-00000.safetensors", 10);
  std::filesystem::remove(d140 / "rank-00001.safetensors");
  { std::ofstream(d120 / "manifest.json") << "{ not json"; }

  LoadResult r = load_checkpoint({dir.path()});
  EXPECT_FALSE(r.checkpoint) << r.summary();
  ASSERT_EQ(r.skipped.size(), 3u) << r.summary();
  EXPECT_NE(r.skipped[0].reason.find("rank-00000.safetensors is 10 bytes, manifest says"), std::string::npos)
      << r.skipped[0].reason;
  EXPECT_EQ(r.skipped[1].reason, "rank-00001.safetensors is missing");
  EXPECT_NE(r.skipped[2].reason.find("manifest.json is not valid JSON"), std::string::npos) << r.skipped[2].reason;
  EXPECT_NE(r.summary().find("starting from scratch"), std::string::npos);
}

TEST(Corruption, RequestedDataComesFromTheCheckpointThatVerified) {
  // The newest checkpoint is corrupt in file 0, which rank 0 hashes while copying its requested
  // elements out of it; those elements must end up holding the older, good checkpoint's values.
  ScratchDir dir;
  const TrainingState old_state = make_state(120);
  save_replicas(dir.path(), old_state);
  save_replicas(dir.path(), make_state(140, 7));
  corrupt_byte(dir.path() / "step-000140" / "rank-00000.safetensors");
  run_ranks(kWorld, [&](Coordinator& c) {
    std::vector<std::vector<float>> got(old_state.tensors.size());
    std::vector<ReadRequest> requests;
    for (size_t i = 0; i < old_state.tensors.size(); ++i) {
      got[i].assign(old_state.tensors[i].data.size(), 0.0f);
      requests.push_back({old_state.tensors[i].name, 0, got[i]});
    }
    LoadResult r = load_checkpoint({dir.path()}, c, requests);
    ASSERT_TRUE(r.checkpoint) << r.summary();
    EXPECT_EQ(r.checkpoint->step(), 120);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(testing::bits_equal(old_state.tensors[i].data, got[i])) << old_state.tensors[i].name;
    }
  });
}

TEST(Load, ACheckpointWithoutARequestedTensorIsSkippedWithTheReason) {
  ScratchDir dir;
  save_replicas(dir.path(), make_state(120));
  std::vector<float> out(4);
  const std::vector<ReadRequest> requests = {{"blocks.9.fc1.weight", 0, out}};
  SoloCoordinator solo;
  LoadResult r = load_checkpoint({dir.path()}, solo, requests);
  EXPECT_FALSE(r.checkpoint);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].reason, "no tensor 'blocks.9.fc1.weight' in the manifest");
}

TEST(Load, EmptyOrMissingRootMeansAFreshStart) {
  ScratchDir dir;
  LoadResult r = load_checkpoint({dir.path() / "does-not-exist"});
  EXPECT_FALSE(r.checkpoint);
  EXPECT_TRUE(r.skipped.empty());
}

TEST(Load, MaxStepRollsBack) {
  ScratchDir dir;
  for (int64_t step : {10, 20, 30}) save_replicas(dir.path(), make_state(step));
  LoadResult r = load_checkpoint({dir.path(), 25});
  ASSERT_TRUE(r.checkpoint);
  EXPECT_EQ(r.checkpoint->step(), 20);
  testing::expect_same_state(make_state(20), r.checkpoint->read_all());
}

}  // namespace
}  // namespace parlab::checkpoint
