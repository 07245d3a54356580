#include "runtime/model/param_layout.h"

#include <gtest/gtest.h>

#include "base/errors.h"

namespace parlab::model {
namespace {

TEST(ParamLayoutTest, NamesShapesAndOffsetsFollowForwardOrder) {
  const MlpShape shape{.hidden = 3, .ffn = 5, .blocks = 2, .classes = 4};
  const ParamLayout layout(shape);
  // Per block: fc1.weight 5x3 = 15, fc1.bias 5, fc2.weight 3x5 = 15, fc2.bias 3 -> 38.
  // Head: 4x3 = 12 + 4 = 16.  Total 2 * 38 + 16 = 92.
  EXPECT_EQ(layout.numel(), 92);
  const auto& t = layout.tensors();
  ASSERT_EQ(t.size(), 10u);
  EXPECT_EQ(t[0].name, "blocks.0.fc1.weight");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(t[0].offset, 0);
  EXPECT_EQ(t[1].name, "blocks.0.fc1.bias");
  EXPECT_EQ(t[1].offset, 15);
  EXPECT_EQ(t[2].name, "blocks.0.fc2.weight");
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t[2].fan_in, 5);
  EXPECT_EQ(t[3].name, "blocks.0.fc2.bias");
  EXPECT_EQ(t[4].name, "blocks.1.fc1.weight");
  EXPECT_EQ(t[4].offset, 38);
  EXPECT_EQ(t[4].layer, 1);
  EXPECT_EQ(t[8].name, "head.weight");
  EXPECT_EQ(t[8].offset, 76);
  EXPECT_EQ(t[8].layer, 2);
  EXPECT_EQ(t[9].name, "head.bias");
  EXPECT_EQ(t[9].numel, 4);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_EQ(t[i].offset, t[i - 1].offset + t[i - 1].numel);
  EXPECT_EQ(layout.layer_range(0), (FlatRange{0, 38}));
  EXPECT_EQ(layout.layer_range(1), (FlatRange{38, 76}));
  EXPECT_EQ(layout.layer_range(2), (FlatRange{76, 92}));
  EXPECT_EQ(layout.layers_range(1, 3), (FlatRange{38, 92}));
  EXPECT_EQ(layout.find("blocks.1.fc2.bias").offset, 38 + 35);
  EXPECT_THROW(layout.find("blocks.2.fc1.weight"), RuntimeError);
  EXPECT_THROW(layout.layer_range(3), ConfigError);
}

TEST(ParamLayoutTest, PresetHasTheExpectedParameterCount) {
  const MlpShape preset = lab_mlp_preset();
  // 8 x (2 x 1024 x 4096 + 4096 + 1024) + 16 x 1024 + 16 = 67,166,224
  EXPECT_EQ(ParamLayout(preset).numel(), 67166224);
}

TEST(ParamLayoutTest, BadShapeNamesTheField) {
  try {
    ParamLayout(MlpShape{.hidden = 4, .ffn = 0, .blocks = 1, .classes = 2});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "model.ffn");
  }
  EXPECT_THROW(ParamLayout(MlpShape{.hidden = 4, .ffn = 4, .blocks = 1, .classes = 1}), ConfigError);
}

}  // namespace
}  // namespace parlab::model
