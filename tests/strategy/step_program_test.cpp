// Step programs: golden programs checked op by op (expected text written by hand from the
// strategies' rules), cross-rank consistency over a grid of plans, and the checker's reports.
#include <gtest/gtest.h>

#include <set>

#include "strategy/consistency.h"
#include "strategy/io.h"
#include "strategy/step_program.h"
#include "parlab/source_dir.h"

namespace parlab::strategy {
namespace {

const std::string kData = std::string(PARLAB_SOURCE_DIR) + "/tests/strategy/data/";

Plan plan_for(const ModelSpec& m, const std::string& text, int world, const std::string& cluster = "dgx-a100") {
  Plan p = resolve(parse_plan(text), m, world);
  validate(p, m, with_world(load_cluster(cluster), world));
  return p;
}

std::vector<StepProgram> world_programs(const ModelSpec& m, const Plan& p) {
  std::vector<StepProgram> out;
  for (int r = 0; r < p.world(); ++r) out.push_back(build_step(m, p, r));
  return out;
}

}  // namespace

// DDP on 2 ranks, one microbatch, 300-byte buckets over the tiny MLP (fp32 gradients). Walking
// the tensors backwards: head.b 8 B, head.w 32, b1.fc2.b 16, b1.fc2.w 128, b1.fc1.b 32 (216 B);
// b1.fc1.w (128) would make 344 > 300, so bucket 0 = elements 108-162, completed by layer 1.
// Bucket 1: b1.fc1.w 128, b0.fc2.b 16, b0.fc2.w 128 (272 B); + b0.fc1.b = 304 > 300, so 40-108,
// completed by layer 0 — the bucket boundary splits block 1. Bucket 2: b0.fc1.b, b0.fc1.w (0-40).
// The last (only) microbatch's backward is written per layer so each bucket's all-reduce starts
// as soon as its lowest layer is done; the optimizer waits for all three. The step opens by
// clearing the whole gradient buffer (162 elements) the backward accumulates into.
TEST(StepProgram, GoldenDdpWithThreeBuckets) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");
  Plan p = plan_for(m, "microbatches=1", 2);
  p.bucket_bytes = 300;
  const std::string expected =
      "0 compute zero-grad grad.zero elems 0-162\n"
      "1 compute forward fwd.mb0.c0 layers 0-3\n"
      "2 compute backward bwd.mb0.head layers 2-3\n"
      "3 compute backward bwd.mb0.blocks.1 layers 1-2\n"
      "4 comm all-reduce grad.bucket0 elems 108-162 216B overlaps-compute dp.0 deps 3\n"
      "5 compute backward bwd.mb0.blocks.0 layers 0-1\n"
      "6 comm all-reduce grad.bucket1 elems 40-108 272B overlaps-compute dp.0 deps 5\n"
      "7 comm all-reduce grad.bucket2 elems 0-40 160B overlaps-compute dp.0 deps 5\n"
      "8 compute optimizer optimizer elems 0-162 deps 4 6 7\n";
  EXPECT_EQ(to_text(build_step(m, p, 0)), expected);
  EXPECT_EQ(to_text(build_step(m, p, 1)), expected);
}

// Two-stage 1F1B with four microbatches. Stage 0 warms up with min(p - s - 1, m) = 1 forward,
// then alternates forward/backward three times, then cools down with one backward; it sends
// activations and receives gradients. Stage 1 has no warm-up: F0 B0 F1 B1 ... and does the
// opposite. Sends are asynchronous (no stream waits on them), receives gate the compute. Each
// stage first clears the gradients of the parameters it holds.
TEST(StepProgram, GoldenTwoStage1F1BWithFourMicrobatches) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");  // stage 0: block 0; stage 1: block 1 + head
  const Plan p = plan_for(m, "pp=2,microbatches=4", 2);
  const std::string stage0 =
      "0 compute zero-grad grad.zero elems 0-76\n"
      "1 compute forward fwd.mb0.blocks.0 layers 0-1 warmup\n"
      "2 comm send act.mb0.vs1 16B to 1 deps 1\n"
      "3 compute forward fwd.mb1.blocks.0 layers 0-1 steady\n"
      "4 comm send act.mb1.vs1 16B to 1 deps 3\n"
      "5 comm recv grad.mb0.vs1 16B from 1\n"
      "6 compute backward bwd.mb0.blocks.0 layers 0-1 steady deps 5\n"
      "7 compute forward fwd.mb2.blocks.0 layers 0-1 steady\n"
      "8 comm send act.mb2.vs1 16B to 1 deps 7\n"
      "9 comm recv grad.mb1.vs1 16B from 1\n"
      "10 compute backward bwd.mb1.blocks.0 layers 0-1 steady deps 9\n"
      "11 compute forward fwd.mb3.blocks.0 layers 0-1 steady\n"
      "12 comm send act.mb3.vs1 16B to 1 deps 11\n"
      "13 comm recv grad.mb2.vs1 16B from 1\n"
      "14 compute backward bwd.mb2.blocks.0 layers 0-1 steady deps 13\n"
      "15 comm recv grad.mb3.vs1 16B from 1\n"
      "16 compute backward bwd.mb3.blocks.0 layers 0-1 cooldown deps 15\n"
      "17 compute optimizer optimizer elems 0-76\n";
  std::string stage1 = "0 compute zero-grad grad.zero elems 0-86\n";  // block 1 (76) + head (10)
  for (int k = 0; k < 4; ++k) {
    const std::string mb = std::to_string(k), b = std::to_string(4 * k + 1);
    stage1 += b + " comm recv act.mb" + mb + ".vs1 16B from 0\n";
    stage1 += std::to_string(4 * k + 2) + " compute forward fwd.mb" + mb + ".c0 layers 1-3 steady deps " + b + "\n";
    stage1 += std::to_string(4 * k + 3) + " compute backward bwd.mb" + mb + ".c0 layers 1-3 steady\n";
    stage1 += std::to_string(4 * k + 4) + " comm send grad.mb" + mb + ".vs1 16B to 0 deps " +
              std::to_string(4 * k + 3) + "\n";
  }
  stage1 += "17 compute optimizer optimizer elems 0-86\n";
  EXPECT_EQ(to_text(build_step(m, p, 0)), stage0);
  EXPECT_EQ(to_text(build_step(m, p, 1)), stage1);
}

// Only the gradient syncs over registered memory overlap compute where ranks fill the cores
// (Op::overlaps_compute): DDP's all-reduces and ZeRO-1's and ZeRO-2's reduce-scatters. ZeRO-3's
// reduce-scatters share the communication thread with the gathers, and no all-gather overlaps.
TEST(StepProgram, OnlyRegisteredGradientSyncsOverlapCompute) {
  const ModelSpec m = load_model("lab-mlp");
  for (int zero : {0, 1, 2, 3}) {
    const Plan p = resolve(parse_plan("zero=" + std::to_string(zero) + ",gbs=256,mb=32"), m, 2);
    const OpKind sync = zero == 0 ? OpKind::kAllReduce : OpKind::kReduceScatter;
    int overlapping = 0, collectives = 0;
    for (const Op& op : build_step(m, p, 0).ops) {
      if (!op.is_collective()) continue;
      ++collectives;
      if (op.overlaps_compute) {
        ++overlapping;
        EXPECT_EQ(op.kind, sync) << op.tag;
      }
    }
    ASSERT_GT(collectives, 0) << zero;
    if (zero <= 2) {
      EXPECT_GT(overlapping, 0) << "zero=" << zero;
    } else {
      EXPECT_EQ(overlapping, 0) << "zero=" << zero;
    }
  }
}

// ZeRO-3 on two layers (block 0: 76 elements, head: 10), dp 2, one microbatch. Each layer's
// parameters are all-gathered before its forward — the next layer is prefetched while the
// current one computes — and again before its backward; the one default-size bucket (86
// elements, completed by layer 0) is reduce-scattered; the rank updates its contiguous half
// (0-43); no all-gather follows (parameters stay sharded until the next forward gathers them).
// No rank keeps a whole gradient: the step clears only the rank's shard of them.
// The shards cut the layers unevenly: block 0 (0-76) has 43 elements in rank 0's shard and 33 in
// rank 1's (min-chunk 33 x 4 = 132 B), the head (76-86) lies wholly in rank 1's (min-chunk 0 B:
// its gather is a broadcast); the bucket's halves are equal (43 + 43), so nothing is printed.
TEST(StepProgram, GoldenZero3OnTwoLayers) {
  const ModelSpec m = load_model(kData + "one-block-mlp.toml");
  const Plan p = plan_for(m, "zero=3,microbatches=1", 2);  // one microbatch (the policy's default is 2 on 2)
  const std::string expected =
      "0 compute zero-grad grad.zero elems 0-43\n"
      "1 comm all-gather param.blocks.0.fwd.mb0 elems 0-76 304B min-chunk 132B dp.0\n"
      "2 comm all-gather param.head.fwd.mb0 elems 76-86 40B min-chunk 0B dp.0\n"
      "3 compute forward fwd.mb0.blocks.0 layers 0-1 deps 1\n"
      "4 compute forward fwd.mb0.head layers 1-2 deps 2\n"
      "5 comm all-gather param.head.bwd.mb0 elems 76-86 40B min-chunk 0B dp.0\n"
      "6 comm all-gather param.blocks.0.bwd.mb0 elems 0-76 304B min-chunk 132B dp.0\n"
      "7 compute backward bwd.mb0.head layers 1-2 deps 5\n"
      "8 compute backward bwd.mb0.blocks.0 layers 0-1 deps 6\n"
      "9 comm reduce-scatter grad.bucket0.mb0 elems 0-86 344B dp.0 deps 8\n"
      "10 compute optimizer optimizer elems 0-43 deps 9\n";
  EXPECT_EQ(to_text(build_step(m, p, 0)), expected);
  // Rank 1 owns the other half.
  const auto r1 = build_step(m, p, 1);
  EXPECT_EQ(r1.ops.back().flat_begin, 43);
  EXPECT_EQ(r1.ops.back().flat_end, 86);
  EXPECT_EQ(r1.ops.front().kind, OpKind::kZeroGrad);
  EXPECT_EQ(r1.ops.front().flat_begin, 43);
  EXPECT_EQ(r1.ops.front().flat_end, 86);
}

// Every ZeRO reduce-scatter and all-gather records its smallest chunk: the smallest part of its
// element range in one rank's shard [n r / dp, n (r + 1) / dp) (zero_shard), in bytes (fp32: 4
// a element); -1 when the chunks are equal. The tiny MLP has n = 162 elements (tiny-mlp.toml:
// blocks.0 0-76, blocks.1 76-152, head 152-162).
TEST(StepProgram, ZeroCollectivesCarryTheirSmallestChunk) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");
  auto min_chunk = [](const StepProgram& prog, const std::string& tag) {
    for (const Op& op : prog.ops)
      if (op.tag == tag) return op.min_chunk_bytes;
    ADD_FAILURE() << "no op " << tag;
    return -2.0;
  };
  // 2 ranks, shards 0-81 and 81-162: blocks.0 lies in rank 0's (a broadcast from it, 0 B),
  // blocks.1 has 5 elements in rank 0's and 71 in rank 1's (20 B), the head is rank 1's; the
  // one bucket (0-162) has 81 + 81: balanced.
  const StepProgram two = build_step(m, plan_for(m, "zero=3,microbatches=1", 2), 0);
  EXPECT_EQ(min_chunk(two, "param.blocks.0.fwd.mb0"), 0);
  EXPECT_EQ(min_chunk(two, "param.blocks.1.fwd.mb0"), 20);
  EXPECT_EQ(min_chunk(two, "param.blocks.1.bwd.mb0"), 20);
  EXPECT_EQ(min_chunk(two, "param.head.bwd.mb0"), 0);
  EXPECT_EQ(min_chunk(two, "grad.bucket0.mb0"), -1);
  // 4 ranks, shards 0-40, 40-81, 81-121, 121-162: every layer misses at least one shard (0 B);
  // the bucket has chunks 40, 41, 40, 41 (160 B).
  const StepProgram four = build_step(m, plan_for(m, "zero=3,microbatches=1", 4), 2);
  for (const char* tag : {"param.blocks.0.fwd.mb0", "param.blocks.1.fwd.mb0", "param.head.fwd.mb0"})
    EXPECT_EQ(min_chunk(four, tag), 0) << tag;
  EXPECT_EQ(min_chunk(four, "grad.bucket0.mb0"), 160);
  // ZeRO-2 with DDP's three 300-byte buckets (GoldenDdpWithThreeBuckets) on 2 ranks: bucket 1
  // (40-108) straddles the shards, 41 + 27 elements (108 B); buckets 0 (108-162) and 2 (0-40)
  // lie in one shard each. The all-gathers after the optimizer cut the same ranges.
  Plan z2 = plan_for(m, "zero=2,microbatches=1", 2);
  z2.bucket_bytes = 300;
  const StepProgram buckets = build_step(m, z2, 1);
  EXPECT_EQ(min_chunk(buckets, "grad.bucket0.mb0"), 0);
  EXPECT_EQ(min_chunk(buckets, "grad.bucket1.mb0"), 108);
  EXPECT_EQ(min_chunk(buckets, "grad.bucket2.mb0"), 0);
  EXPECT_EQ(min_chunk(buckets, "param.bucket1"), 108);
  // The chunks are the shards' intersections, rank by rank.
  EXPECT_EQ(zero_chunk_elements(40, 108, 162, 2), (std::vector<int64_t>{41, 27}));
  EXPECT_EQ(zero_chunk_elements(0, 162, 162, 4), (std::vector<int64_t>{40, 41, 40, 41}));
  // DDP's all-reduces move whole buckets on every rank: no chunks.
  for (const Op& op : build_step(m, plan_for(m, "microbatches=1", 2), 0).ops)
    EXPECT_EQ(op.min_chunk_bytes, -1) << op.tag;
}

// ZeRO-2/3 zero a bucket per microbatch (slots of a ring the rank keeps across steps) and add
// each reduced chunk into the rank's shard: the backward that opens a bucket
// carries those bytes, so that the cost model and the simulator charge the compute stream for
// them. DDP and ZeRO-1 accumulate into the one gradient buffer the step clears: none.
TEST(StepProgram, ZeroTwoAndThreeChargeTheirBucketsToTheOpeningBackward) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");
  for (const char* text : {"zero=2,microbatches=3", "zero=3,microbatches=3"}) {
    Plan p = plan_for(m, text, 2);
    p.bucket_bytes = 300;  // three buckets (ZeroCollectivesCarryTheirSmallestChunk)
    for (int rank : {0, 1}) {
      const StepProgram prog = build_step(m, p, rank);
      const double elem = grad_accumulation_bytes_per_element(p);
      double zeroed = 0, added = 0, reduced_chunks = 0, shard = 0;
      int openers = 0;
      for (const Op& op : prog.ops) {
        if (op.zeroed_bytes > 0 || op.accumulated_bytes > 0) {
          EXPECT_EQ(op.kind, OpKind::kBackward) << text << " " << op.tag;
          ++openers;
        }
        zeroed += op.zeroed_bytes, added += op.accumulated_bytes;
        if (op.kind == OpKind::kReduceScatter) {
          const auto [b, e] = zero_shard(162, 2, rank);
          reduced_chunks += double(std::max<int64_t>(0, std::min(e, op.flat_end) - std::max(b, op.flat_begin))) * elem;
        }
        if (op.kind == OpKind::kOptimizer) shard = double(op.flat_end - op.flat_begin) * elem;
      }
      EXPECT_EQ(openers, 3 * 3) << text;                 // three buckets, three microbatches
      EXPECT_DOUBLE_EQ(zeroed, 3 * 162 * elem) << text;  // every microbatch zeroes its ring slots
      EXPECT_DOUBLE_EQ(added, reduced_chunks) << text;   // every reduce-scatter's own chunk
      EXPECT_DOUBLE_EQ(added, 3 * shard) << text;        // = the shard, once per microbatch
    }
  }
  for (const char* text : {"microbatches=3", "zero=1,microbatches=3"})
    for (const Op& op : build_step(m, plan_for(m, text, 2), 0).ops)
      EXPECT_EQ(op.zeroed_bytes + op.accumulated_bytes, 0) << text << " " << op.tag;
}

TEST(StepProgram, TensorParallelCarriesMegatronCollectives) {
  const ModelSpec m = load_model("gpt-22b");
  const Plan p = plan_for(m, "tp=8,microbatches=1", 8);
  const auto prog = build_step(m, p, 3);
  // Forward of the whole model: 1 (vocab-parallel embedding) + 2 per block; backward: 2 per
  // block + 1 (output layer input).
  int fwd = 0, bwd = 0;
  for (const auto& op : prog.ops) {
    if (op.kind != OpKind::kAllReduce || prog.group_of(op).kind != GroupKind::kTP) continue;
    EXPECT_EQ(op.stream, Stream::kCompute);
    EXPECT_DOUBLE_EQ(op.bytes, 2048.0 * 6144 * 2);  // s b h bf16 activations, mb 1
    (op.tag.rfind("tp.fwd", 0) == 0 ? fwd : bwd) += op.count;
  }
  EXPECT_EQ(fwd, 1 + 2 * 48);
  EXPECT_EQ(bwd, 2 * 48 + 1);
  EXPECT_EQ(prog.groups[1].ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Sequence parallel: every all-reduce becomes a reduce-scatter plus an all-gather, same bytes;
  // and each block's backward gathers again the sequence shards of its two column-parallel
  // linears' inputs (QKV, the MLP's first), which it kept instead of the gathered tensors:
  // 2 more all-gathers per block, all after the block's backward.
  const Plan sp = plan_for(m, "tp=8,sp=on,microbatches=1", 8);
  const auto sp_prog = build_step(m, sp, 0);
  int rs = 0, ag = 0, ar = 0, regathers = 0;
  for (const auto& op : sp_prog.ops) {
    if (op.kind == OpKind::kReduceScatter) rs += op.count;
    if (op.kind == OpKind::kAllGather) ag += op.count;
    if (op.kind == OpKind::kAllReduce && op.group == 1) ar += op.count;
    if (op.kind == OpKind::kAllGather && op.tag.size() > 9 && op.tag.compare(op.tag.size() - 9, 9, ".ag.input") == 0) {
      ++regathers;
      EXPECT_EQ(op.tag.rfind("tp.bwd", 0), 0u) << op.tag;
      EXPECT_EQ(sp_prog.ops[op.deps.at(0)].kind, OpKind::kBackward) << op.tag;
      EXPECT_DOUBLE_EQ(op.bytes, 2048.0 * 6144 * 2) << op.tag;  // the whole s b h input, gathered
    }
  }
  EXPECT_EQ(rs, fwd + bwd);
  EXPECT_EQ(ag, fwd + bwd + 2 * 48);
  EXPECT_EQ(regathers, 2 * 48);
  EXPECT_EQ(ar, 0);
  // The lab MLP the runtime trains keeps its gathered block inputs: no re-gather.
  const ModelSpec mlp = load_model("lab-mlp");
  for (const auto& op : build_step(mlp, plan_for(mlp, "tp=2,sp=on", 2, "cpu-local"), 0).ops)
    EXPECT_EQ(op.tag.find(".ag.input"), std::string::npos) << op.tag;
}

TEST(StepProgram, GradientAccumulationCommunicatesOnlyOnTheLastMicrobatch) {
  const ModelSpec m = load_model("lab-mlp");
  const Plan p = plan_for(m, "microbatches=4", 2, "cpu-local");
  const auto prog = build_step(m, p, 0);
  int forwards = 0;
  for (const auto& op : prog.ops) {
    if (op.kind == OpKind::kForward) ++forwards;
    if (op.kind == OpKind::kAllReduce) {
      ASSERT_FALSE(op.deps.empty());
      EXPECT_EQ(prog.ops[op.deps[0]].microbatch, 3) << op.tag;
    }
  }
  EXPECT_EQ(forwards, 4);
  // lab-mlp fp32 gradients: 67.2 M elements = 269 MB in 25 MiB buckets -> at least 10 buckets,
  // covering every element exactly once.
  int64_t covered = 0;
  for (const auto& op : prog.ops)
    if (op.kind == OpKind::kAllReduce) covered += op.flat_end - op.flat_begin;
  EXPECT_EQ(double(covered), m.total_params());
}

TEST(StepProgram, InterleavedScheduleVisitsEveryChunkAndMicrobatch) {
  const ModelSpec m = load_model("gpt-22b");
  const Plan p = plan_for(m, "pp=4,schedule=interleaved,v=2,microbatches=8", 4);
  for (int stage = 0; stage < 4; ++stage) {
    const auto prog = build_step(m, p, stage);
    std::set<std::pair<int, int>> fwd, bwd;
    int first_backward = -1, forwards_before = 0;
    for (const auto& op : prog.ops) {
      if (op.kind == OpKind::kForward) {
        fwd.insert({op.microbatch, op.chunk});
        if (first_backward < 0) ++forwards_before;
      }
      if (op.kind == OpKind::kBackward) {
        bwd.insert({op.microbatch, op.chunk});
        if (first_backward < 0) first_backward = op.id;
      }
    }
    EXPECT_EQ(fwd.size(), 16u);
    EXPECT_EQ(bwd.size(), 16u);
    // Megatron's warm-up: 2 (p - s - 1) + (v - 1) p forwards, then one steady forward.
    EXPECT_EQ(forwards_before, 2 * (4 - stage - 1) + 4 + 1) << "stage " << stage;
  }
}

// Every generator, over a grid of plans: every collective on every member of its group in the
// same order with the same bytes, and every send received.
TEST(StepProgram, ConsistentAcrossRanksOverAGridOfPlans) {
  struct Case {
    std::string model, plan;
    int world;
  };
  const std::vector<Case> cases = {
      {"lab-mlp", "", 4},
      {"lab-mlp", "microbatches=3,bucket_mb=7", 4},
      {"lab-mlp", "zero=1", 4},
      {"lab-mlp", "zero=2,microbatches=2", 4},
      {"lab-mlp", "zero=3,microbatches=2", 2},
      {"lab-mlp", "tp=2", 4},
      {"lab-mlp", "pp=4,microbatches=6", 4},
      {"lab-mlp", "pp=2,tp=2,microbatches=4,schedule=gpipe", 8},
      {"lab-mlp", "pp=2,schedule=interleaved,v=2,microbatches=4", 4},
      {"gpt-22b", "tp=2,pp=2,microbatches=4", 8},
      {"gpt-22b", "tp=2,pp=2,zero=1,microbatches=4,sp=on,recompute=selective", 16},
      {"gpt-22b", "pp=4,schedule=interleaved,v=3,microbatches=8", 8},
      {"gpt-22b", "tp=4,zero=3", 8},
      {"llama2-7b", "tp=2,pp=2,microbatches=2", 8},
  };
  for (const auto& c : cases) {
    const ModelSpec m = load_model(c.model);
    const Plan p = plan_for(m, c.plan, c.world);
    const auto problems = check_consistency(world_programs(m, p));
    EXPECT_TRUE(problems.empty()) << c.model << " " << c.plan << ": " << problems.front();
  }
}

TEST(Consistency, NamesTheRankThatSkipsAnAllReduce) {
  const ModelSpec m = load_model("lab-mlp");
  const Plan p = plan_for(m, "", 4, "cpu-local");
  auto programs = world_programs(m, p);
  // Rank 2 skips its third bucket's all-reduce.
  auto& ops = programs[2].ops;
  int seen = 0;
  for (auto it = ops.begin(); it != ops.end(); ++it)
    if (it->kind == OpKind::kAllReduce && seen++ == 2) {
      ops.erase(it);
      break;
    }
  const auto problems = check_consistency(programs);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("group dp.0: call #2 all-reduce grad.bucket2"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("rank 2 issues all-reduce grad.bucket3"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("ranks 0, 1, 3 do"), std::string::npos) << problems[0];
}

TEST(Consistency, UnmatchedSendAndWrongBytes) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");
  const Plan p = plan_for(m, "pp=2,microbatches=2", 2);
  auto programs = world_programs(m, p);
  for (auto& op : programs[1].ops)
    if (op.kind == OpKind::kRecv) {
      op.bytes *= 2;
      break;
    }
  auto problems = check_consistency(programs);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("0 -> 1: send #0 act.mb0.vs1 (16 B) meets receive act.mb0.vs1 (32 B)"), std::string::npos)
      << problems[0];
}

TEST(Consistency, FirstDisagreementVotesTheReference) {
  std::map<int, std::vector<CallRecord>> calls;
  const CallRecord a{"all-reduce", 100, "a"}, b{"all-reduce", 100, "b"};
  calls[0] = {a, a};
  calls[1] = {a, a};
  calls[2] = {a};
  calls[3] = {a, b};
  const Disagreement d = first_disagreement(calls);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.reference.tag, "a");
  EXPECT_EQ(d.agreeing, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.missing, (std::vector<int>{2}));
  EXPECT_EQ(d.different, (std::vector<int>{3}));
  calls[2].push_back(a);
  calls[3][1] = a;
  EXPECT_FALSE(first_disagreement(calls).found);
}

}  // namespace parlab::strategy
