// One program: the coarse step programs the cost model and the simulator walk (one compute op per
// model chunk and microbatch) and the per-layer programs the runtime executes
// (BuildOptions::per_layer_ops) must describe the same step. Written down more finely, a program
// may only split a compute op into its layers; every communicator still sees the same calls in the
// same order with the same bytes, every pipeline peer the same messages, and the rank computes the
// same FLOPs and moves the same memory. If they disagreed, "simulated vs measured" would compare
// two different programs.
//
// The expected side is not a golden program: each program is reduced to what a communicator and
// a device observe (the call sequence per group, the message sequence per peer, summed work), and
// the two reductions are compared, for every rank of every split.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "strategy/io.h"
#include "strategy/step_program.h"
#include "parlab/source_dir.h"

namespace parlab::strategy {
namespace {

const std::string kData = std::string(PARLAB_SOURCE_DIR) + "/tests/strategy/data/";

// One call a communicator sees: the collective and its bytes (a `count` op is count calls, a run
// of calls its pattern `count` times: Op::calls(), Op::call_kind()).
using Call = std::tuple<std::string, double>;

struct Observed {
  std::map<std::string, std::vector<int>> group_members;                // group name -> ranks
  std::map<std::string, std::vector<Call>> calls;                       // group name -> calls in order
  std::map<std::pair<std::string, int>, std::vector<double>> messages;  // (send|recv, peer) -> bytes
  double flops = 0, memory_bytes = 0;
  int compute_ops = 0;
};

Observed observe(const StepProgram& p) {
  Observed o;
  for (const Group& g : p.groups) o.group_members[g.name] = g.ranks;
  for (const Op& op : p.ops) {
    if (op.is_collective()) {
      auto& seq = o.calls[p.group_of(op).name];
      for (int i = 0; i < op.calls(); ++i) seq.emplace_back(std::string(to_string(op.call_kind(i))), op.bytes);
    } else if (op.is_p2p()) {
      o.messages[{std::string(to_string(op.kind)), op.peer}].push_back(op.bytes);
    } else {
      o.flops += op.flops;
      o.memory_bytes += op.memory_bytes;
      ++o.compute_ops;
    }
  }
  return o;
}

std::string describe_calls(const std::vector<Call>& calls) {
  std::string s;
  for (size_t i = 0; i < calls.size() && i < 12; ++i)
    s += std::get<0>(calls[i]) + " " + std::to_string(int64_t(std::get<1>(calls[i]))) + "; ";
  if (calls.size() > 12) s += "... (" + std::to_string(calls.size()) + " calls)";
  return s;
}

void expect_one_program(const ModelSpec& m, const std::string& plan_text, int world) {
  SCOPED_TRACE(m.name + " " + plan_text);
  Plan p = resolve(parse_plan(plan_text), m, world);
  validate(p, m, with_world(load_cluster("dgx-a100"), world));
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const StepProgram coarse = build_step(m, p, r);
    const StepProgram fine = build_step(m, p, r, {.per_layer_ops = true});
    const Observed c = observe(coarse), f = observe(fine);
    EXPECT_EQ(c.group_members, f.group_members);
    ASSERT_EQ(c.calls.size(), f.calls.size());
    for (const auto& [group, calls] : c.calls) {
      ASSERT_TRUE(f.calls.count(group)) << group;
      EXPECT_EQ(calls, f.calls.at(group)) << "group " << group << "\n coarse: " << describe_calls(calls)
                                          << "\n per-layer: " << describe_calls(f.calls.at(group));
    }
    EXPECT_EQ(c.messages, f.messages);
    EXPECT_NEAR(c.flops, f.flops, 1e-12 * f.flops);
    EXPECT_NEAR(c.memory_bytes, f.memory_bytes, 1e-12 * f.memory_bytes);
    EXPECT_GT(c.flops, 0);
    // The per-layer program really is finer wherever a chunk holds more than one layer, so the
    // comparison above is not of a program with itself.
    EXPECT_GE(f.compute_ops, c.compute_ops);
  }
}

// The splits, each on the lab MLP the runtime trains and on a GPT decoder (attention, tied
// embeddings, sequence parallelism), with several microbatches so gradient accumulation, the
// pipeline's phases and ZeRO-2's per-microbatch reduce-scatters all appear.
const std::vector<std::pair<std::string, int>> kSplits = {
    {"dp=4,microbatches=2", 4},                                // DDP
    {"dp=4,zero=1,microbatches=2", 4},                         // ZeRO-1
    {"dp=4,zero=2,microbatches=2", 4},                         // ZeRO-2
    {"dp=4,zero=3,microbatches=2", 4},                         // ZeRO-3
    {"tp=2,microbatches=2", 2},                                // tensor parallel
    {"pp=2,schedule=gpipe,microbatches=4", 2},                 // GPipe
    {"pp=2,schedule=1f1b,microbatches=4", 2},                  // 1F1B
    {"pp=2,schedule=interleaved,v=2,microbatches=4", 2},       // interleaved 1F1B
    {"dp=2,tp=2,microbatches=2", 4},                           // DP x TP
    {"dp=2,pp=2,zero=1,microbatches=4", 4},                    // ZeRO-1 x PP
    {"tp=2,pp=2,schedule=interleaved,v=2,microbatches=4", 4},  // TP x interleaved PP
    {"dp=2,tp=2,pp=2,microbatches=4", 8},                      // 3D
    {"dp=2,tp=2,recompute=full,microbatches=2", 4},            // full recompute replays TP
};

TEST(OneProgram, LabMlpCoarseAndPerLayerProgramsAgree) {
  const ModelSpec m = load_model("lab-mlp");  // 8 blocks + head: chunks of several layers
  for (const auto& [plan, world] : kSplits) expect_one_program(m, plan, world);
}

TEST(OneProgram, GptCoarseAndPerLayerProgramsAgree) {
  const ModelSpec m = load_model(kData + "gpt-350m.toml");
  for (const auto& [plan, world] : kSplits) expect_one_program(m, plan, world);
  // Sequence parallelism turns each TP all-reduce into a reduce-scatter and an all-gather.
  expect_one_program(m, "tp=2,sp=on,microbatches=2", 2);
  expect_one_program(m, "tp=2,pp=2,sp=on,recompute=selective,microbatches=4", 4);
  expect_one_program(m, "dp=2,tp=2,sp=on,zero=2,microbatches=2", 4);
}

// Runs of calls (BuildOptions::call_runs, what the planner walks) make the calls of the per-call
// program in the same order; only sequence parallelism's are written as runs, and they take far
// fewer ops. Everything else (compute, messages) is the same.
TEST(OneProgram, CallRunsMakeThePerCallProgramsCalls) {
  const ModelSpec m = load_model(kData + "gpt-350m.toml");
  const std::vector<std::pair<std::string, int>> splits = {
      {"tp=2,sp=on,microbatches=2", 2},
      {"tp=2,pp=2,sp=on,recompute=selective,microbatches=4", 4},
      {"tp=2,pp=2,sp=on,recompute=full,schedule=interleaved,v=2,microbatches=4", 4},
      {"dp=2,tp=2,sp=on,zero=3,microbatches=2", 4},
      {"dp=2,tp=2,pp=2,sp=on,zero=1,schedule=interleaved,v=2,microbatches=4", 8},
      {"dp=2,tp=2,pp=2,microbatches=4", 8},  // no sequence parallelism: nothing to run
  };
  for (const auto& [plan_text, world] : splits) {
    Plan p = resolve(parse_plan(plan_text), m, world);
    validate(p, m, with_world(load_cluster("dgx-a100"), world));
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(plan_text + " rank " + std::to_string(r));
      const StepProgram calls = build_step(m, p, r), runs = build_step(m, p, r, {.tags = false, .call_runs = true});
      const Observed c = observe(calls), u = observe(runs);
      EXPECT_EQ(c.calls, u.calls);
      EXPECT_EQ(c.messages, u.messages);
      EXPECT_EQ(c.flops, u.flops);
      EXPECT_EQ(c.compute_ops, u.compute_ops);
      int patterned = 0;
      for (const Op& op : runs.ops) patterned += op.pattern_calls > 0 ? 1 : 0;
      if (p.sequence_parallel) {
        EXPECT_GT(patterned, 0);
        EXPECT_LT(runs.ops.size(), calls.ops.size());
      } else {
        EXPECT_EQ(patterned, 0);
        EXPECT_EQ(runs.ops.size(), calls.ops.size());
      }
    }
  }
}

// Untagged programs (BuildOptions::tags = false, what the planner walks) are the tagged ones with
// every tag empty: the same ops, fields and dependencies, in the same order.
TEST(OneProgram, UntaggedProgramsDifferOnlyInTags) {
  auto same_op = [](const Op& a, const Op& b) {
    return std::tie(a.id, a.kind, a.stream, a.phase, a.flops, a.memory_bytes, a.layers.begin, a.layers.end,
                    a.microbatch, a.chunk, a.group, a.bytes, a.count, a.peer, a.flat_begin, a.flat_end, a.deps) ==
           std::tie(b.id, b.kind, b.stream, b.phase, b.flops, b.memory_bytes, b.layers.begin, b.layers.end,
                    b.microbatch, b.chunk, b.group, b.bytes, b.count, b.peer, b.flat_begin, b.flat_end, b.deps);
  };
  std::vector<std::pair<std::string, int>> splits = kSplits;
  splits.push_back({"dp=2,tp=2,pp=2,sp=on,zero=1,schedule=interleaved,v=2,microbatches=4", 8});
  splits.push_back({"dp=2,tp=2,sp=on,zero=3,microbatches=2", 4});
  for (const ModelSpec& m : {load_model("lab-mlp"), load_model(kData + "gpt-350m.toml")})
    for (const auto& [plan_text, world] : splits) {
      Plan p = resolve(parse_plan(plan_text), m, world);
      validate(p, m, with_world(load_cluster("dgx-a100"), world));
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE(m.name + " " + plan_text + " rank " + std::to_string(r));
        const StepProgram tagged = build_step(m, p, r), untagged = build_step(m, p, r, {.tags = false});
        ASSERT_EQ(tagged.ops.size(), untagged.ops.size());
        EXPECT_EQ(tagged.groups.size(), untagged.groups.size());
        int named = 0;
        for (size_t i = 0; i < tagged.ops.size(); ++i) {
          EXPECT_TRUE(same_op(tagged.ops[i], untagged.ops[i])) << "op " << i << ": " << tagged.ops[i].tag;
          EXPECT_EQ(untagged.ops[i].tag, "") << "op " << i;
          named += tagged.ops[i].tag.empty() ? 0 : 1;
        }
        EXPECT_EQ(named, int(tagged.ops.size()));  // every tagged op has a name to leave out
      }
    }
}

// The reduction itself must see a difference when there is one: a program whose per-layer form
// reorders one group's calls is caught (a guard against a comparison that cannot fail).
TEST(OneProgram, ObservationSeesReorderedCalls) {
  const ModelSpec m = load_model(kData + "gpt-350m.toml");
  Plan p = resolve(parse_plan("tp=2,sp=on"), m, 2);
  StepProgram fine = build_step(m, p, 0, {.per_layer_ops = true});
  const Observed before = observe(fine);
  for (size_t i = 0; i + 1 < fine.ops.size(); ++i)
    if (fine.ops[i].kind == OpKind::kReduceScatter && fine.ops[i + 1].kind == OpKind::kAllGather) {
      std::swap(fine.ops[i].kind, fine.ops[i + 1].kind);
      break;
    }
  EXPECT_NE(before.calls, observe(fine).calls);
}

}  // namespace
}  // namespace parlab::strategy

namespace parlab::strategy {

// Full recompute replays each layer's forward, collectives included, inside its backward
// (Megatron checkpoints the whole layer): gpt-22b at tp 8 then makes, per microbatch, the
// backward's 2 x 48 + 1 all-reduces plus the replayed forward's 1 + 2 x 48. Selective recompute
// replays only the attention core: no extra calls.
TEST(OneProgram, FullRecomputeReplaysTheForwardCollectives) {
  const ModelSpec m = load_model("gpt-22b");
  auto backward_calls = [&](const std::string& recompute) {
    const Plan p = resolve(parse_plan("tp=8,microbatches=1,recompute=" + recompute), m, 8);
    int n = 0;
    for (const Op& op : build_step(m, p, 0).ops)
      if (op.kind == OpKind::kAllReduce && op.tag.rfind("tp.bwd", 0) == 0) n += op.count;
    return n;
  };
  EXPECT_EQ(backward_calls("none"), 2 * 48 + 1);
  EXPECT_EQ(backward_calls("selective"), 2 * 48 + 1);
  EXPECT_EQ(backward_calls("full"), 2 * 48 + 1 + 1 + 2 * 48);
}

}  // namespace parlab::strategy
