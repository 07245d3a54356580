#pragma once
// The lab-mlp's shape and the layout of its parameters in ONE flat fp32 buffer.
//
//   x_0 (B, h)                          input
//   x_{i+1} = x_i + fc2(gelu(fc1(x_i)))  block i = 0..L-1; fc1: h -> f, fc2: f -> h (with bias)
//   logits = head(x_L) (B, C)            layer L = head, which also owns the loss
//   loss = mean over the GLOBAL batch of softmax cross-entropy(logits, labels)
//
// Parameters follow PyTorch nn.Linear names and shapes, in forward order:
//   blocks.{i}.fc1.weight (f, h), blocks.{i}.fc1.bias (f),
//   blocks.{i}.fc2.weight (h, f), blocks.{i}.fc2.bias (h),
//   head.weight (C, h), head.bias (C).
// Each named tensor is a view (offset, numel, shape) of the flat buffer; the gradient buffer has
// the same layout. Because the order is the forward order, every layer's parameters form one
// contiguous flat range, so DDP buckets, ZeRO shards, pipeline stages and checkpoints can all be
// described as [begin, end) ranges of the flat buffer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parlab::model {

// Plain shape of the lab network (strategy::ModelSpec is converted into it at the edge).
struct MlpShape {
  int64_t hidden = 0;   // h
  int64_t ffn = 0;      // f
  int64_t blocks = 0;   // L
  int64_t classes = 0;  // C

  // Throws ConfigError naming the field when a size is out of range (hidden, ffn, classes >= 1;
  // blocks >= 0; classes >= 2 so the loss is not trivially 0).
  void validate() const;
  // Layers as the executor counts them: L blocks + the head.
  int num_layers() const { return static_cast<int>(blocks) + 1; }
  bool operator==(const MlpShape&) const = default;
};

// The preset "lab-mlp": h 1024, f 4096, 8 blocks, 16 classes (microbatch kLabMlpMicrobatch).
MlpShape lab_mlp_preset();
inline constexpr int64_t kLabMlpMicrobatch = 64;

// [begin, end) of a flat buffer, in elements.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t numel() const { return end - begin; }
  bool contains(const FlatRange& r) const { return begin <= r.begin && r.end <= end; }
  bool intersects(const FlatRange& r) const { return begin < r.end && r.begin < end; }
  bool operator==(const FlatRange&) const = default;
};

// One named tensor of the flat buffer.
struct ParamTensor {
  std::string name;            // "blocks.3.fc2.weight"
  std::vector<int64_t> shape;  // {h, f}
  int64_t offset = 0;          // first element in the flat buffer
  int64_t numel = 0;
  int layer = 0;       // 0..L-1 blocks, L head
  int64_t fan_in = 0;  // inputs of the linear map it belongs to (init bound 1/sqrt(fan_in))
  FlatRange range() const { return {offset, offset + numel}; }
};

class ParamLayout {
 public:
  explicit ParamLayout(const MlpShape& shape);

  const MlpShape& shape() const { return shape_; }
  // All tensors in forward (= flat) order.
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // Total parameters (= flat buffer length).
  int64_t numel() const { return numel_; }
  int num_layers() const { return shape_.num_layers(); }
  // Flat range of layer `layer`'s parameters (0..L-1 blocks, L head).
  FlatRange layer_range(int layer) const;
  // Flat range of layers [first_layer, end_layer).
  FlatRange layers_range(int first_layer, int end_layer) const;
  // Throws RuntimeError if no tensor has this name.
  const ParamTensor& find(std::string_view name) const;

 private:
  MlpShape shape_;
  std::vector<ParamTensor> tensors_;
  std::vector<int64_t> layer_begin_;  // L + 2 entries: layer l spans [layer_begin_[l], [l+1])
  int64_t numel_ = 0;
};

}  // namespace parlab::model
