#include "runtime/model/param_layout.h"

#include <string>

#include "base/errors.h"

namespace parlab::model {

void MlpShape::validate() const {
  auto require = [](const char* field, int64_t value, int64_t min) {
    if (value < min) {
      throw ConfigError(field, std::to_string(value), "must be >= " + std::to_string(min));
    }
  };
  require("model.hidden", hidden, 1);
  require("model.ffn", ffn, 1);
  require("model.blocks", blocks, 0);
  require("model.classes", classes, 2);
}

MlpShape lab_mlp_preset() { return MlpShape{.hidden = 1024, .ffn = 4096, .blocks = 8, .classes = 16}; }

ParamLayout::ParamLayout(const MlpShape& shape) : shape_(shape) {
  shape_.validate();
  const int64_t h = shape_.hidden, f = shape_.ffn, C = shape_.classes;
  auto add = [this](std::string name, std::vector<int64_t> dims, int layer, int64_t fan_in) {
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    tensors_.push_back(ParamTensor{std::move(name), std::move(dims), numel_, numel, layer, fan_in});
    numel_ += numel;
  };
  for (int i = 0; i < shape_.blocks; ++i) {
    layer_begin_.push_back(numel_);
    const std::string prefix = "blocks." + std::to_string(i) + ".";
    add(prefix + "fc1.weight", {f, h}, i, h);
    add(prefix + "fc1.bias", {f}, i, h);
    add(prefix + "fc2.weight", {h, f}, i, f);
    add(prefix + "fc2.bias", {h}, i, f);
  }
  const int head = static_cast<int>(shape_.blocks);
  layer_begin_.push_back(numel_);
  add("head.weight", {C, h}, head, h);
  add("head.bias", {C}, head, h);
  layer_begin_.push_back(numel_);
}

FlatRange ParamLayout::layer_range(int layer) const { return layers_range(layer, layer + 1); }

FlatRange ParamLayout::layers_range(int first_layer, int end_layer) const {
  if (first_layer < 0 || end_layer > num_layers() || first_layer > end_layer) {
    throw ConfigError("layers", "[" + std::to_string(first_layer) + ", " + std::to_string(end_layer) + ")",
                      "must lie within [0, " + std::to_string(num_layers()) + ")");
  }
  return {layer_begin_[first_layer], layer_begin_[end_layer]};
}

const ParamTensor& ParamLayout::find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  throw RuntimeError("lab-mlp has no parameter named '" + std::string(name) + "'");
}

}  // namespace parlab::model
