// Complete training state survives a save and a load bit for bit, whatever the number of writers,
// and the files on disk are laid out as the manifest says.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "parlab/version.h"
#include "runtime/checkpoint/checkpoint.h"
#include "tests/runtime/checkpoint/test_util.h"

namespace parlab::checkpoint {
namespace {

using nlohmann::json;
using testing::bits_equal;
using testing::make_state;
using testing::run_ranks;
using testing::ScratchDir;

// Total elements of make_state(), by hand: fc1.weight 35, fc1.bias 7, exp_avg 35, exp_avg_sq 35,
// fc2.weight 21, fc2.bias 3, momentum_buffer 21, loss_scale 1.
constexpr int64_t kStateElements = 35 + 7 + 35 + 35 + 21 + 3 + 21 + 1;  // 158

void save_replicas(const std::filesystem::path& root, const TrainingState& s, int world, int keep_last = 3) {
  run_ranks(world, [&](Coordinator& c) {
    const auto slices = replica_share(s, world, c.rank());
    save_checkpoint({root, keep_last, {}}, s.step, slices, s.metadata, c);
  });
}

TEST(EvenRange, SplitsByHand) {
  // 10 over 4: sizes 3, 3, 2, 2.
  EXPECT_EQ(even_range(10, 4, 0).begin, 0);
  EXPECT_EQ(even_range(10, 4, 0).end, 3);
  EXPECT_EQ(even_range(10, 4, 1).end, 6);
  EXPECT_EQ(even_range(10, 4, 2).end, 8);
  EXPECT_EQ(even_range(10, 4, 3).begin, 8);
  EXPECT_EQ(even_range(10, 4, 3).end, 10);
  EXPECT_EQ(even_range(2, 4, 3).count(), 0) << "more ranks than items: the last ones get nothing";
  EXPECT_THROW(even_range(10, 4, 4), ConfigError);
}

TEST(LocalGroup, EveryRankSeesEveryContributionEveryRound) {
  run_ranks(4, [](Coordinator& c) {
    for (int round = 0; round < 50; ++round) {
      const auto all = c.all_gather(std::to_string(round * 10 + c.rank()));
      ASSERT_EQ(all.size(), 4u);
      for (int r = 0; r < 4; ++r) ASSERT_EQ(all[static_cast<size_t>(r)], std::to_string(round * 10 + r));
    }
  });
}

class RoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(RoundTrip, StateIsBitIdenticalAfterSaveAndLoad) {
  const int world = GetParam();
  ScratchDir dir;
  const TrainingState s = make_state(120);
  ASSERT_EQ(s.total_elements(), kStateElements);
  save_replicas(dir.path(), s, world);

  // One process reads everything back.
  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint) << r.summary();
  EXPECT_TRUE(r.skipped.empty()) << r.summary();
  EXPECT_EQ(r.checkpoint->manifest().world_size, world);
  testing::expect_same_state(s, r.checkpoint->read_all());

  // W ranks each read back exactly their own share.
  run_ranks(world, [&](Coordinator& c) {
    LoadResult mine = load_checkpoint({dir.path()}, c);
    ASSERT_TRUE(mine.checkpoint);
    for (const TensorSlice& slice : replica_share(s, world, c.rank())) {
      std::vector<float> got(slice.data.size());
      mine.checkpoint->read(slice.name, slice.begin_element, got);
      EXPECT_TRUE(bits_equal({slice.data.begin(), slice.data.end()}, got)) << slice.name;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Writers, RoundTrip, ::testing::Values(1, 2, 4));

TEST(RoundTrip, DirectoryLayoutAndManifestMatchAHandSplit) {
  ScratchDir dir;
  const TrainingState s = make_state(120);
  save_replicas(dir.path(), s, 2);
  const auto ckpt = dir.path() / "step-000120";
  EXPECT_TRUE(std::filesystem::is_regular_file(ckpt / "manifest.json"));
  EXPECT_TRUE(std::filesystem::is_regular_file(ckpt / "rank-00000.safetensors"));
  EXPECT_TRUE(std::filesystem::is_regular_file(ckpt / "rank-00001.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000120.tmp"));
  std::ifstream latest(dir.path() / "latest");
  std::string pointer((std::istreambuf_iterator<char>(latest)), std::istreambuf_iterator<char>());
  EXPECT_EQ(pointer, "step-000120\n");

  std::ifstream mf(ckpt / "manifest.json");
  const json m = json::parse(mf);
  EXPECT_EQ(m["step"], 120);
  EXPECT_EQ(m["world_size"], 2);
  EXPECT_EQ(m["parlab_version"], kVersion);
  EXPECT_EQ(m["hash"], "xxh3_64");
  EXPECT_EQ(m["metadata"], s.metadata);
  // 158 elements over 2 ranks: 79 each. Rank 0 holds fc1.weight (35), fc1.bias (7),
  // fc1.weight.exp_avg (35) = 77, then elements [0, 2) of fc1.weight.exp_avg_sq.
  json sq;
  for (const json& t : m["tensors"]) {
    if (t["name"] == "fc1.weight.exp_avg_sq") sq = t;
  }
  EXPECT_EQ(sq["shape"], json({7, 5}));
  EXPECT_EQ(sq["pieces"], json::parse(R"([{"file":0,"begin":0,"end":2},{"file":1,"begin":2,"end":35}])"));

  // Every listed size and checksum is that of the file on disk, hashed here independently.
  for (const json& f : m["files"]) {
    std::ifstream in(ckpt / f["name"].get<std::string>(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(f["bytes"], bytes.size());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
    EXPECT_EQ(f["xxh3_64"], hex);
  }
}

TEST(RoundTrip, EmptyTensorsSurviveWithTheirShapes) {
  ScratchDir dir;
  TrainingState s = make_state(11);
  s.tensors.insert(s.tensors.begin() + 1, Tensor{"unused.weight", {0, 3}, {}});
  run_ranks(3, [&](Coordinator& c) {
    const auto slices = replica_share(s, 3, c.rank());
    save_checkpoint({dir.path()}, s.step, slices, s.metadata, c);
  });
  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint) << r.summary();
  testing::expect_same_state(s, r.checkpoint->read_all());
}

TEST(RoundTrip, SingleWriterShardIsAPlainSafetensorsFileWithGlobalShapes) {
  ScratchDir dir;
  const TrainingState s = make_state(7);
  save_checkpoint({dir.path()}, s);
  const SafetensorsFile f = SafetensorsFile::open(dir.path() / "step-000007" / "rank-00000.safetensors");
  EXPECT_EQ(f.info("fc1.weight").shape, std::vector<int64_t>({7, 5}));
  EXPECT_EQ(f.info("loss_scale").shape, std::vector<int64_t>{});
  EXPECT_TRUE(bits_equal(f.read_f32("fc2.weight"), s.find("fc2.weight")->data));
}

TEST(RoundTrip, ZeroShardedWritersEachOwningPiecesOfEveryTensor) {
  // ZeRO-style: rank r owns even_range(numel, W, r) of every tensor rather than a share of the
  // concatenated state.
  ScratchDir dir;
  const TrainingState s = make_state(3);
  constexpr int kWorld = 3;
  run_ranks(kWorld, [&](Coordinator& c) {
    std::vector<TensorSlice> mine;
    for (const Tensor& t : s.tensors) {
      const ElementRange r = even_range(static_cast<int64_t>(t.data.size()), kWorld, c.rank());
      mine.push_back(
          {t.name, t.shape, r.begin,
           std::span<const float>(t.data).subspan(static_cast<size_t>(r.begin), static_cast<size_t>(r.count()))});
    }
    save_checkpoint({dir.path()}, s.step, mine, s.metadata, c);
  });
  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint);
  // fc1.bias has 7 elements: pieces of 3, 2, 2 in files 0, 1, 2.
  const ManifestTensor* bias = r.checkpoint->manifest().find("fc1.bias");
  ASSERT_EQ(bias->pieces.size(), 3u);
  EXPECT_EQ(bias->pieces[1].file, 1u);
  EXPECT_EQ(bias->pieces[1].range.begin, 3);
  EXPECT_EQ(bias->pieces[1].range.end, 5);
  testing::expect_same_state(s, r.checkpoint->read_all());
}

TEST(RoundTrip, InconsistentSlicesFailOnEveryRankAndCommitNothing) {
  ScratchDir dir;
  const TrainingState s = make_state(5);
  std::atomic<int> failures{0};
  run_ranks(2, [&](Coordinator& c) {
    // Both ranks claim all of fc1.bias: overlapping pieces cannot tile the tensor.
    const Tensor& b = *s.find("fc1.bias");
    const std::vector<TensorSlice> mine = {{b.name, b.shape, 0, b.data}};
    try {
      save_checkpoint({dir.path()}, s.step, mine, s.metadata, c);
    } catch (const Error&) {
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000005"));
  EXPECT_FALSE(load_checkpoint({dir.path()}).checkpoint);
}

TEST(RoundTrip, BadSliceOnOneRankFailsEveryRank) {
  ScratchDir dir;
  const std::vector<float> three = {1, 2, 3};
  std::atomic<int> failures{0};
  run_ranks(2, [&](Coordinator& c) {
    // Rank 1 claims elements [2, 5) of a 4-element tensor.
    const std::vector<TensorSlice> mine = {
        {"t", {4}, c.rank() == 0 ? 0 : 2, std::span<const float>(three).first(c.rank() == 0 ? 2 : 3)}};
    try {
      save_checkpoint({dir.path()}, 1, mine, json::object(), c);
    } catch (const Error&) {
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "step-000001"));
}

TEST(Fingerprint, IgnoresKeyOrderButNotValues) {
  const json a = json::parse(R"({"h": 1024, "f": 4096, "blocks": 8})");
  const json b = json::parse(R"({"blocks": 8, "f": 4096, "h": 1024})");
  const json c = json::parse(R"({"blocks": 8, "f": 4096, "h": 1025})");
  EXPECT_EQ(json_fingerprint(a), json_fingerprint(b));
  EXPECT_NE(json_fingerprint(a), json_fingerprint(c));
  EXPECT_EQ(json_fingerprint(a).size(), 16u);
}

TEST(YoungDaly, MatchesTheClosedForm) {
  // C = 60 s, MTBF = 1 day = 86400 s: sqrt(2 * 60 * 86400) = sqrt(10368000) = 3219.937...
  EXPECT_NEAR(young_daly_interval_seconds(60, 86400), 3219.9378, 1e-3);
  // C = 2 s, MTBF = 8 s: sqrt(32) = 5.65685...
  EXPECT_NEAR(young_daly_interval_seconds(2, 8), 5.656854, 1e-6);
  EXPECT_THROW(young_daly_interval_seconds(0, 100), ConfigError);
  EXPECT_THROW(young_daly_interval_seconds(10, -1), ConfigError);
}

}  // namespace
}  // namespace parlab::checkpoint
