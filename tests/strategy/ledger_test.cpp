// The memory ledger against hand computations and published figures.
#include <gtest/gtest.h>

#include "strategy/io.h"
#include "strategy/ledger.h"
#include "strategy/partition.h"

namespace parlab::strategy {
namespace {

struct Setup {
  ModelSpec model;
  ClusterSpec cluster;
  Plan plan;
};

Setup setup(const ModelSpec& m, const std::string& plan_text, int world) {
  Setup s{m, with_world(load_cluster("dgx-a100"), world), {}};
  s.plan = resolve(parse_plan(plan_text), m, world);
  validate(s.plan, s.model, s.cluster);
  return s;
}

const LayerSpec& first_block(const std::vector<LayerSpec>& layers) {
  for (const auto& l : layers)
    if (l.kind == LayerKind::kBlock) return l;
  throw std::runtime_error("no block");
}

}  // namespace

// ZeRO (Rajbhandari et al., SC'20), Figure 1: a 7.5 B-parameter model on 64 GPUs with mixed
// precision Adam (K = 12) needs 120 GB per GPU as plain DDP, 31.4 GB with stage 1 (P_os),
// 16.6 GB with stage 2 (P_os+g) and 1.9 GB with stage 3 (P_os+g+p).
TEST(Ledger, ZeroStagesReproduceTheZeroPaper) {
  const ModelSpec m = params_model(7.5e9);
  const double psi = 7.5e9, nd = 64;
  const double expect[4] = {
      (2 + 2 + 12) * psi,                 // 120 GB
      2 * psi + 2 * psi + 12 * psi / nd,  // 31.4 GB
      2 * psi + (2 + 12) * psi / nd,      // 16.6 GB
      (2 + 2 + 12) * psi / nd,            // 1.875 GB
  };
  const double paper_gb[4] = {120, 31.4, 16.6, 1.9};
  for (int zero = 0; zero <= 3; ++zero) {
    auto s = setup(m, "zero=" + std::to_string(zero), 64);
    const auto l = compute_ledger(s.model, s.plan, s.cluster, 0);
    EXPECT_DOUBLE_EQ(l.model_state_bytes(), expect[zero]) << "zero=" << zero;
    EXPECT_NEAR(l.model_state_bytes() / 1e9, paper_gb[zero], 0.05) << "zero=" << zero;
  }
}

TEST(Ledger, BytesPerParameterByPrecisionAndOptimizer) {
  // ZeRO section 3.1: mixed-precision Adam keeps 2 + 2 + 12 bytes per parameter.
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kMixed, OptimizerKind::kAdam).total(), 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kMixed, OptimizerKind::kAdam).optimizer, 12);
  // fp32 Adam: 4 (params) + 4 (grads) + 8 (momentum, variance).
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kFp32, OptimizerKind::kAdam).total(), 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kFp32, OptimizerKind::kAdam).optimizer, 8);
  // SGD with momentum keeps one buffer (+ the fp32 master copy under mixed precision).
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kFp32, OptimizerKind::kSgd).optimizer, 4);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(Precision::kMixed, OptimizerKind::kSgd).optimizer, 8);
}

// Mixed precision as parlab's runtime keeps it (mixed_state=fp32-main, the lab network's
// default): two bf16 copies of each of the blocks' weight matrices (W for the forward, W^T for the
// input gradient), fp32 main gradients (Megatron's rule for bf16), fp32 master + AdamW moments;
// the master replicated below ZeRO-3. By hand for lab-mlp (8 blocks of 1024 x 4096 and
// 4096 x 1024, biases 4096 + 1024, head 16 x 1024 + 16) on 4 ranks.
TEST(Ledger, MixedPrecisionAsTheRuntimeKeepsIt) {
  const ModelSpec m = load_model("lab-mlp");
  const double w = 8.0 * 2 * 1024 * 4096;  // block weight matrices: the bf16 copies, 2 x 2 B each
  const double n = w + 8.0 * (4096 + 1024) + 16 * 1024 + 16;
  ASSERT_DOUBLE_EQ(n, m.total_params());
  const double dp = 4;
  struct Row {
    int zero;
    double params, grads, optimizer;
  };
  const Row rows[] = {
      {0, 4 * w, 4 * n, 4 * n + 8 * n},
      {1, 4 * w, 4 * n, 4 * n + 8 * n / dp},
      {2, 4 * w, 4 * n / dp, 4 * n + 8 * n / dp},
      {3, 0, 4 * n / dp, 4 * n / dp + 8 * n / dp},  // the bf16 copies are made from each gather
  };
  for (const Row& r : rows) {
    auto s = setup(m, "precision=mixed,zero=" + std::to_string(r.zero), 4);
    ASSERT_EQ(s.plan.mixed_state, MixedState::kFp32Main) << "the lab network defaults to the runtime's layout";
    const auto l = compute_ledger(s.model, s.plan, s.cluster, 0);
    EXPECT_DOUBLE_EQ(l.params_bytes, r.params) << "zero=" << r.zero;
    EXPECT_DOUBLE_EQ(l.grads_bytes, r.grads) << "zero=" << r.zero;
    EXPECT_DOUBLE_EQ(l.optimizer_bytes, r.optimizer) << "zero=" << r.zero;
  }
  // Activations of one microbatch of 64: three bf16 saves per block (input, fc1 out, GELU out),
  // the head's fp32 input and logits, the fp32 data, and one fp32 block input in flight.
  auto s = setup(m, "precision=mixed", 1);
  const double b = 64, h = 1024, f = 4096;
  EXPECT_DOUBLE_EQ(compute_ledger(s.model, s.plan, s.cluster, 0).activations_bytes,
                   8 * b * (h + 2 * f) * 2 + b * (4 * h + 4 * 16) + b * h * 4 + b * h * 4);
  // The ZeRO paper's convention is still there by name, and round-trips through the plan text.
  auto zero_paper = setup(m, "precision=mixed,mixed_state=zero", 1);
  EXPECT_DOUBLE_EQ(compute_ledger(zero_paper.model, zero_paper.plan, zero_paper.cluster, 0).grads_bytes, 2 * n);
  EXPECT_EQ(parse_plan(zero_paper.plan.to_string()).mixed_state, MixedState::kZero);
  EXPECT_EQ(parse_plan(s.plan.to_string()).mixed_state, MixedState::kFp32Main);
  // Gradients cross the wire in fp32 under fp32-main, in 16 bits under the paper's convention.
  EXPECT_DOUBLE_EQ(state_bytes_per_param(s.plan).wire_grads, 4);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(zero_paper.plan).wire_grads, 2);
}

// Models parlab does not train keep the ZeRO paper's convention unless told otherwise.
TEST(Ledger, OtherModelsDefaultToTheZeroPapersMixedPrecision) {
  const ModelSpec m = load_model("gpt-22b");
  auto s = setup(m, "", 8);
  EXPECT_EQ(s.plan.mixed_state, MixedState::kZero);
  auto fm = setup(m, "mixed_state=fp32-main", 8);
  const StateBytes per = state_bytes_per_param(fm.plan);
  EXPECT_DOUBLE_EQ(per.params + per.grads + per.optimizer, 18);  // Megatron: bf16 params, fp32 grads
}

// Korthikanti et al. 2022, Table 2, one layer of gpt-22b (s 2048, h 6144, a 64), microbatch 1.
TEST(Ledger, TransformerActivationsFollowKorthikantiTable2) {
  const ModelSpec m = load_model("gpt-22b");
  const auto layers = m.layer_list();
  const LayerSpec& block = first_block(layers);
  const double s = 2048, b = 1, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  auto act = [&](const std::string& plan, int world) {
    auto st = setup(m, plan, world);
    return activation_bytes(block, st.model, st.plan);
  };
  EXPECT_DOUBLE_EQ(act("", 1), sbh * (34 + 5 * a * s / h));                      // no parallelism
  EXPECT_DOUBLE_EQ(act("tp=8", 8), sbh * (10 + 24 / t + 5 * a * s / (h * t)));   // tensor parallel
  EXPECT_DOUBLE_EQ(act("tp=8,sp=on", 8), sbh * (34 / t + 5 * a * s / (h * t)));  // + sequence parallel
  EXPECT_DOUBLE_EQ(act("tp=8,recompute=selective", 8), sbh * (10 + 24 / t));     // selective
  EXPECT_DOUBLE_EQ(act("tp=8,sp=on,recompute=selective", 8), sbh * 34 / t);      // both
  EXPECT_DOUBLE_EQ(act("tp=8,recompute=full", 8), 2 * sbh);                      // full
  // fp32 activations take twice the bytes.
  EXPECT_DOUBLE_EQ(act("precision=fp32", 1), 2 * sbh * (34 + 5 * a * s / h));
}

TEST(Ledger, MlpActivationsKeepInputAndBothHiddenTensors) {
  const ModelSpec m = load_model("lab-mlp");  // fp32, mb 64
  auto st = setup(m, "", 1);
  const auto layers = m.layer_list();
  // Per sample: block input (1024) + fc1 output (4096) + GELU output (4096), 4 bytes each.
  EXPECT_DOUBLE_EQ(activation_bytes(layers[0], st.model, st.plan), 64.0 * (1024 + 2 * 4096) * 4);
  // Head: its input (1024 fp32) and fp32 logits (16).
  EXPECT_DOUBLE_EQ(activation_bytes(layers[8], st.model, st.plan), 64.0 * (1024 * 4 + 16 * 4));
}

// Weight-gradient groups (plan.h): at least 512 rows a product, never more microbatches than a
// rank's step has, none where ZeRO-2/3 reduce every microbatch or a TP slice computes. The CPU
// runtime's blocks hold the group's rows (x, dy, post, dpre), which the ledger counts as
// activations on cpu-local and nowhere else.
TEST(Ledger, WeightGradGroupsAsTheCpuRuntimeHoldsThem) {
  const ModelSpec m = load_model("lab-mlp");  // fp32, mb 64, 8 blocks of 1024 x 4096
  const auto group = [&](const std::string& text, int world) {
    return weight_grad_group(resolve(parse_plan(text), m, world));
  };
  EXPECT_EQ(group("gbs=512", 1), 8);
  EXPECT_EQ(group("gbs=1024", 1), 8) << "512 rows are enough";
  EXPECT_EQ(group("gbs=128", 1), 2) << "no more than the step's microbatches";
  EXPECT_EQ(group("gbs=64", 1), 1);
  EXPECT_EQ(group("gbs=600,mb=200", 1), 3);
  EXPECT_EQ(group("gbs=512,zero=1", 2), 4);
  EXPECT_EQ(group("gbs=512,zero=2", 2), 1);
  EXPECT_EQ(group("gbs=512,zero=3", 2), 1);
  EXPECT_EQ(group("gbs=512,tp=2", 2), 1);
  EXPECT_EQ(group("gbs=512,pp=2", 2), 1);

  const ClusterSpec cpu = with_world(load_cluster("cpu-local"), 1);
  const auto activations = [&](const std::string& text, const ClusterSpec& c) {
    return compute_ledger(m, resolve(parse_plan(text), m, 1), c, 0).activations_bytes;
  };
  // gbs 256 vs 64: one microbatch in flight either way; the first holds 4 microbatches' rows.
  EXPECT_DOUBLE_EQ(activations("gbs=256", cpu) - activations("gbs=64", cpu), 8 * 4 * 64.0 * 2 * (1024 + 4096) * 4);
  const ClusterSpec gpu = with_world(load_cluster("dgx-a100"), 1);
  EXPECT_DOUBLE_EQ(activations("gbs=256", gpu), activations("gbs=64", gpu)) << "no groups off the CPU runtime";
}

// 1F1B: stage i holds pp - i microbatches in flight, so the first stage holds pp of them
// (Narayanan et al. 2021); GPipe holds all m; interleaving multiplies the first stage by
// 1 + (pp - 1)/(pp v) (Korthikanti et al. 2022).
TEST(Ledger, PipelineScheduleDecidesMicrobatchesInFlight) {
  const ModelSpec m = load_model("gpt-22b");  // 48 layers
  auto one_f = setup(m, "pp=4,microbatches=8", 4);
  auto stages = ledger_per_stage(one_f.model, one_f.plan, one_f.cluster);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].inflight_microbatches, 4);
  EXPECT_EQ(stages[3].inflight_microbatches, 1);
  const auto layers = m.layer_list();
  const double block = activation_bytes(first_block(layers), one_f.model, one_f.plan);
  const double embed = activation_bytes(layers.front(), one_f.model, one_f.plan);
  // Stage 0 owns the embedding and 12 blocks; 4 microbatches of them are alive.
  EXPECT_DOUBLE_EQ(stages[0].activations_bytes, 4 * (embed + 12 * block));

  auto gpipe = setup(m, "pp=4,microbatches=8,schedule=gpipe", 4);
  EXPECT_EQ(ledger_per_stage(gpipe.model, gpipe.plan, gpipe.cluster)[2].inflight_microbatches, 8);

  auto inter = setup(m, "pp=4,microbatches=8,schedule=interleaved,v=2", 4);
  const auto is = ledger_per_stage(inter.model, inter.plan, inter.cluster);
  // Warm-up on stage 0: 2 (pp - 1) + (v - 1) pp + 1 = 6 + 4 + 1 = 11 chunk-forwards of 6 blocks,
  // i.e. 66 = 48 (1 + 3/8) block-activations: the interleaving factor.
  EXPECT_EQ(is[0].inflight_microbatches, 11);
  // Forward k runs chunk (k mod 8) / 4: forwards 0-3 and 8-10 are chunk 0 (the embedding and
  // blocks 1-6), 4-7 chunk 1 (6 blocks). So stage 0 holds 7 x 6 + 4 x 6 = 66 block-activations
  // -- 48 (1 + 3/8), Korthikanti et al.'s interleaving factor -- and 7 embedding-activations.
  const double iblock = activation_bytes(first_block(layers), inter.model, inter.plan);
  const double iembed = activation_bytes(layers.front(), inter.model, inter.plan);
  EXPECT_DOUBLE_EQ(is[0].activations_bytes, 48 * (1 + 3.0 / 8) * iblock + 7 * iembed);
}

TEST(Ledger, TensorParallelSplitsWeightsButNotNorms) {
  const ModelSpec m = load_model("gpt-22b");
  auto s = setup(m, "tp=8", 8);
  const auto l = compute_ledger(s.model, s.plan, s.cluster, 0);
  const double h = 6144, L = 48, V = 51200, seq = 2048;
  // Split by 8: QKV, projection, fc1, fc2 weights (12 h^2), QKV and fc1 biases (3h + 4h) and the
  // vocab-parallel embedding. Whole: LayerNorms (4h), projection and fc2 biases (2h), positions,
  // final norm.
  const double held = L * ((12 * h * h + 7 * h) / 8 + 6 * h) + V * h / 8 + seq * h + 2 * h;
  EXPECT_DOUBLE_EQ(l.params_held, held);
  EXPECT_DOUBLE_EQ(l.params_bytes, 2 * held);
  EXPECT_DOUBLE_EQ(l.optimizer_bytes, 12 * held);
}

TEST(Ledger, TiedEmbeddingCopyOnTheLastStage) {
  const ModelSpec m = load_model("gpt-22b");
  auto s = setup(m, "pp=2", 2);
  const auto st = ledger_per_stage(s.model, s.plan, s.cluster);
  const double h = 6144;
  // Stage 0: embedding (V h + s h) + 24 blocks; stage 1: 24 blocks + final norm + a copy of the
  // token embedding for the logits.
  const double block = 12 * h * h + 13 * h;
  EXPECT_DOUBLE_EQ(st[0].params_held, 51200 * h + 2048 * h + 24 * block);
  EXPECT_DOUBLE_EQ(st[1].params_held, 24 * block + 2 * h + 51200 * h);
}

TEST(Ledger, TemporaryBuffers) {
  // DDP: two gradient buckets in flight.
  const ModelSpec m = load_model("gpt-22b");
  auto ddp = setup(m, "bucket_mb=25", 8);
  EXPECT_DOUBLE_EQ(compute_ledger(ddp.model, ddp.plan, ddp.cluster, 0).temp_bytes, 2 * 25.0 * 1024 * 1024);
  auto single = setup(m, "", 1);
  EXPECT_DOUBLE_EQ(compute_ledger(single.model, single.plan, single.cluster, 0).temp_bytes, 0);
  // ZeRO-3 adds the gathered parameters of two layers (bf16) and one layer's gradient.
  auto z3 = setup(m, "zero=3", 8);
  const double big = double(m.largest_layer_params());
  EXPECT_DOUBLE_EQ(compute_ledger(z3.model, z3.plan, z3.cluster, 0).temp_bytes,
                   2 * 25.0 * 1024 * 1024 + big * (2 * 2 + 2));
}

TEST(Ledger, FitsComparesTotalWithDevice) {
  const ModelSpec m = load_model("gpt-175b");
  auto ddp = setup(m, "", 8);
  EXPECT_FALSE(compute_ledger(ddp.model, ddp.plan, ddp.cluster, 0).fits());  // 2.8 TB of state
  const ModelSpec lab = load_model("lab-mlp");
  auto small = setup(lab, "", 1);
  const auto l = compute_ledger(small.model, small.plan, small.cluster, 0);
  EXPECT_TRUE(l.fits());
  EXPECT_DOUBLE_EQ(l.device_bytes, 80.0 * 1024 * 1024 * 1024);
}

TEST(Partition, BlocksSpreadEvenlyWithEmbeddingFirstAndHeadLast) {
  const ModelSpec m = load_model("lab-mlp");  // 8 blocks + head = 9 entries
  Plan p = resolve(parse_plan("pp=3"), m, 3);
  const auto vs = virtual_stages(m, p);
  ASSERT_EQ(vs.size(), 3u);
  // 8 blocks over 3 stages: 3, 3, 2; the head joins the last.
  EXPECT_EQ(vs[0].begin, 0);
  EXPECT_EQ(vs[0].end, 3);
  EXPECT_EQ(vs[1].begin, 3);
  EXPECT_EQ(vs[1].end, 6);
  EXPECT_EQ(vs[2].begin, 6);
  EXPECT_EQ(vs[2].end, 9);
  const ModelSpec g = load_model("gpt-22b");  // embed + 48 blocks + head
  Plan q = resolve(parse_plan("pp=4,schedule=interleaved,v=2,microbatches=4"), g, 4);
  const auto chunks = stage_chunks(g, q, 1);
  ASSERT_EQ(chunks.size(), 2u);
  // Virtual stages 1 and 5 of 8, six blocks each: layer-list entries 7..12 and 31..36.
  EXPECT_EQ(chunks[0].begin, 7);
  EXPECT_EQ(chunks[0].end, 13);
  EXPECT_EQ(chunks[1].begin, 31);
  EXPECT_EQ(chunks[1].end, 37);
}

// The seed's worked example, verbatim: device 80 GB, parameters 28, gradients 28, optimizer 56,
// activations 18, largest layer 6.
TEST(Rule, SeedWorkedExample) {
  RuleInputs in;
  in.params_bytes = 28e9;
  in.grads_bytes = 28e9;
  in.optimizer_bytes = 56e9;
  in.activations_bytes = 18e9;
  in.largest_layer_bytes = 6e9;
  in.device_bytes = 80e9;
  const RuleVerdict v = apply_rule(in);
  EXPECT_FALSE(v.ddp_fits);
  EXPECT_TRUE(v.shard_model_state);
  EXPECT_FALSE(v.tensor_split_needed);
  EXPECT_FALSE(v.pipeline_candidate);
  EXPECT_DOUBLE_EQ(v.replica_bytes, 130e9);
  EXPECT_EQ(v.blocker, "total state");
  EXPECT_EQ(v.candidates, std::vector<std::string>{"ZeRO sharding"});
}

TEST(Rule, NamesEachBlocker) {
  RuleInputs in{10e9, 10e9, 20e9, 5e9, 1e9, 80e9};
  EXPECT_EQ(apply_rule(in).blocker, "none");
  EXPECT_EQ(apply_rule(in).candidates, std::vector<std::string>{"DDP"});
  in.activations_bytes = 50e9;  // state 40 fits, replica 90 does not
  EXPECT_EQ(apply_rule(in).blocker, "activations");
  EXPECT_TRUE(apply_rule(in).pipeline_candidate);
  in.largest_layer_bytes = 90e9;
  EXPECT_EQ(apply_rule(in).blocker, "one oversized layer");
  EXPECT_TRUE(apply_rule(in).tensor_split_needed);
}

TEST(Rule, InputsFromAModelAreOneUnsplitReplica) {
  const ModelSpec m = load_model("gpt-22b");
  auto s = setup(m, "tp=8,pp=1", 8);
  const RuleInputs in = rule_inputs(s.model, s.plan, s.cluster);
  EXPECT_DOUBLE_EQ(in.params_bytes, 2 * m.total_params());
  EXPECT_DOUBLE_EQ(in.optimizer_bytes, 12 * m.total_params());
  EXPECT_DOUBLE_EQ(in.largest_layer_bytes, 16.0 * m.largest_layer_params());
}

}  // namespace parlab::strategy
