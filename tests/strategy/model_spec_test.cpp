// Parameter counts and FLOPs of the presets against published figures and closed forms computed
// here by hand, independently of ModelSpec::layer_list().
#include <gtest/gtest.h>

#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/model_spec.h"

namespace parlab::strategy {

// Megatron's count for a GPT with tied embeddings (Narayanan et al. 2021, eq. 2 without the
// approximation): L (12 h^2 + 13 h) + V h (tokens) + s h (positions) + 2 h (final LayerNorm).
static double megatron_params(double L, double h, double V, double s) {
  return L * (12 * h * h + 13 * h) + V * h + s * h + 2 * h;
}

TEST(ModelSpec, GptPresetsMatchMegatronParameterCount) {
  struct Case {
    const char* name;
    double L, h;
  };
  for (const auto& c : {Case{"gpt-22b", 48, 6144}, Case{"gpt-175b", 96, 12288}, Case{"gpt-530b", 105, 20480},
                        Case{"gpt-1t", 128, 25600}}) {
    const ModelSpec m = load_model(c.name);
    EXPECT_DOUBLE_EQ(m.total_params(), megatron_params(c.L, c.h, 51200, 2048)) << c.name;
    EXPECT_EQ(m.seq_len, 2048);
    EXPECT_EQ(m.vocab, 51200);
  }
  // The names promise the sizes: 175B is 174.6e9 by this count.
  EXPECT_NEAR(load_model("gpt-175b").total_params() / 1e9, 174.6, 0.1);
}

TEST(ModelSpec, LlamaPresetsMatchPublishedCheckpointSizes) {
  // Element counts of the released Llama 2 checkpoints (sum over every tensor).
  EXPECT_DOUBLE_EQ(load_model("llama2-7b").total_params(), 6738415616.0);
  EXPECT_DOUBLE_EQ(load_model("llama2-70b").total_params(), 68976648192.0);
}

TEST(ModelSpec, LabMlpHasPyTorchNamesAndShapes) {
  const ModelSpec m = load_model("lab-mlp");
  // 8 blocks of fc1 (4096x1024 + 4096) and fc2 (1024x4096 + 1024), head 16x1024 + 16.
  const double expected = 8 * (4096.0 * 1024 + 4096 + 1024.0 * 4096 + 1024) + 16 * 1024 + 16;
  EXPECT_DOUBLE_EQ(m.total_params(), expected);
  const auto layers = m.layer_list();
  ASSERT_EQ(layers.size(), 9u);
  EXPECT_EQ(layers[0].params[0].name, "blocks.0.fc1.weight");
  EXPECT_EQ(layers[0].params[0].shape, (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(layers[7].params[2].name, "blocks.7.fc2.weight");
  EXPECT_EQ(layers[7].params[2].shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(layers[8].params[0].name, "head.weight");
  EXPECT_EQ(layers[8].params[1].name, "head.bias");
  EXPECT_EQ(m.default_microbatch, 64);
  EXPECT_EQ(m.default_precision, Precision::kFp32);
}

TEST(ModelSpec, ForwardFlopsPerToken) {
  const ModelSpec m = load_model("gpt-175b");
  const double h = 12288, s = 2048, L = 96, V = 51200;
  // Megatron: 24 h^2 + 4 s h per block and token, 2 h V for the logits.
  EXPECT_DOUBLE_EQ(m.forward_flops_per_token(), L * (24 * h * h + 4 * s * h) + 2 * h * V);
  EXPECT_DOUBLE_EQ(m.backward_flops_per_token(), 2 * m.forward_flops_per_token());
  const ModelSpec mlp = load_model("lab-mlp");
  // Two GEMMs of 1024x4096 per block (2 FLOPs per multiply-add) plus the 1024x16 head.
  EXPECT_DOUBLE_EQ(mlp.forward_flops_per_token(), 8 * (2 * 2.0 * 1024 * 4096) + 2.0 * 1024 * 16);
}

TEST(ModelSpec, LargestOperatorAndLayer) {
  const ModelSpec m = load_model("gpt-175b");
  EXPECT_EQ(m.largest_operator_params(), 51200LL * 12288);  // the token embedding
  EXPECT_EQ(m.largest_layer_params(), 12LL * 12288 * 12288 + 13 * 12288);
  EXPECT_EQ(m.params_per_block(), 12LL * 12288 * 12288 + 13 * 12288);
}

TEST(ModelSpec, ValidationNamesTheField) {
  ModelSpec m = load_model("gpt-22b");
  m.heads = 7;  // does not divide 6144
  try {
    validate(m);
    FAIL() << "heads=7 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "model.heads");
    EXPECT_EQ(e.value(), "7");
  }
  m = load_model("gpt-22b");
  m.layers = 0;
  EXPECT_THROW(validate(m), ConfigError);
  EXPECT_THROW(params_model(-1), ConfigError);
  EXPECT_THROW(params_model(0), ConfigError);
}

}  // namespace parlab::strategy
