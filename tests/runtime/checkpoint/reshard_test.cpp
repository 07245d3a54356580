// A checkpoint written by N ranks loads into M ranks, which save it again: after any chain of
// world sizes every tensor is bit-identical to the original.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/checkpoint/checkpoint.h"
#include "tests/runtime/checkpoint/test_util.h"

namespace parlab::checkpoint {
namespace {

using testing::make_state;
using testing::run_ranks;
using testing::ScratchDir;

// One hop: M ranks load the newest checkpoint, each keeping only the ZeRO-style shard it owns
// (even_range of every tensor), and save it as `next_step`.
void reshard_hop(const std::filesystem::path& root, int world, int64_t next_step) {
  // Tensor names and shapes as the trainer would know them from its model.
  const TrainingState shapes = make_state(0);
  run_ranks(world, [&](Coordinator& c) {
    std::vector<std::vector<float>> owned(shapes.tensors.size());
    std::vector<ReadRequest> requests;
    std::vector<TensorSlice> slices;
    for (size_t i = 0; i < shapes.tensors.size(); ++i) {
      const Tensor& t = shapes.tensors[i];
      const ElementRange mine = even_range(static_cast<int64_t>(t.data.size()), world, c.rank());
      owned[i].assign(static_cast<size_t>(mine.count()), std::nanf(""));
      requests.push_back({t.name, mine.begin, owned[i]});
      slices.push_back({t.name, t.shape, mine.begin, owned[i]});
    }
    // The data lands in `owned` during load: partly while verifying, partly read afterwards.
    LoadResult r = load_checkpoint({root}, c, requests);
    ASSERT_TRUE(r.checkpoint) << r.summary();
    save_checkpoint({root}, next_step, slices, r.checkpoint->metadata(), c);
  });
}

TEST(Reshard, ChainOfWorldSizesKeepsEveryTensorBitIdentical) {
  ScratchDir dir;
  TrainingState s = make_state(100);
  // The first save is DDP-style: 4 replicas, each writing a quarter of the concatenated state.
  run_ranks(4, [&](Coordinator& c) {
    const auto slices = replica_share(s, 4, c.rank());
    save_checkpoint({dir.path()}, s.step, slices, s.metadata, c);
  });
  int64_t step = s.step;
  for (int world : {3, 2, 4, 1, 5}) {
    SCOPED_TRACE("resharded into " + std::to_string(world) + " ranks");
    reshard_hop(dir.path(), world, ++step);
    LoadResult r = load_checkpoint({dir.path()});
    ASSERT_TRUE(r.checkpoint);
    EXPECT_EQ(r.checkpoint->step(), step);
    EXPECT_EQ(r.checkpoint->manifest().world_size, world);
    s.step = step;
    testing::expect_same_state(s, r.checkpoint->read_all());
  }
}

TEST(Reshard, ReadsThatCrossShardFilesAreStitched) {
  ScratchDir dir;
  const TrainingState s = make_state(9);
  run_ranks(4, [&](Coordinator& c) {
    const auto slices = replica_share(s, 4, c.rank());
    save_checkpoint({dir.path()}, s.step, slices, s.metadata, c);
  });
  LoadResult r = load_checkpoint({dir.path()});
  ASSERT_TRUE(r.checkpoint);
  // 158 elements over 4 ranks: 40, 40, 39, 39. In the concatenated state fc1.weight is [0, 35)
  // and fc1.bias [35, 42); rank 0 ends at 40 = element 5 of fc1.bias, so fc1.bias is split
  // across files 0 and 1 at element 5.
  const ManifestTensor* bias = r.checkpoint->manifest().find("fc1.bias");
  ASSERT_EQ(bias->pieces.size(), 2u);
  EXPECT_EQ(bias->pieces[0].file, 0u);
  EXPECT_EQ(bias->pieces[0].range.end, 5);
  EXPECT_EQ(bias->pieces[1].file, 1u);
  // A read of elements [3, 7) takes 2 from file 0 and 2 from file 1.
  std::vector<float> got(4);
  r.checkpoint->read("fc1.bias", 3, got);
  const auto& want = s.find("fc1.bias")->data;
  EXPECT_TRUE(testing::bits_equal({want.begin() + 3, want.end()}, got));
  std::vector<float> too_long(5);
  EXPECT_THROW(r.checkpoint->read("fc1.bias", 3, too_long), RuntimeError);
  EXPECT_THROW(r.checkpoint->read("no.such.tensor", 0, got), RuntimeError);
}

}  // namespace
}  // namespace parlab::checkpoint
