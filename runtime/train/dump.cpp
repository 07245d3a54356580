#include "runtime/train/dump.h"

#include <algorithm>

#include "runtime/checkpoint/safetensors.h"
#include "base/errors.h"

namespace parlab::train {

std::filesystem::path dump_dir_for_rank(const std::filesystem::path& dir, int rank, int world) {
  return world > 1 ? dir / ("rank-" + std::to_string(rank)) : dir;
}

void write_dump_inputs(const std::filesystem::path& dir, int64_t width, std::span<model::MicrobatchState> mbs,
                       const std::vector<std::vector<int64_t>>& indices,
                       const std::map<std::string, std::string>& metadata) {
  std::filesystem::create_directories(dir);
  // Views borrow these until the file is written.
  std::vector<std::vector<int64_t>> labels(mbs.size());
  std::vector<checkpoint::TensorView> views;
  for (size_t k = 0; k < mbs.size(); ++k) {
    model::MicrobatchState& mb = mbs[k];
    const std::string suffix = ".mb" + std::to_string(k);
    const int64_t b = mb.batch();
    const std::span<const float> x = mb.activation(0);
    labels[k].assign(mb.labels().begin(), mb.labels().end());
    views.push_back(checkpoint::TensorView::f32("inputs" + suffix, {b, width}, x));
    views.push_back(checkpoint::TensorView::i64("labels" + suffix, {b}, labels[k]));
    views.push_back(checkpoint::TensorView::i64("indices" + suffix, {b}, indices.at(k)));
  }
  checkpoint::write_safetensors(dir / "inputs.safetensors", views, metadata);
}

void write_dump_tensors(const std::filesystem::path& file, const model::ParamLayout& layout, int64_t first,
                        std::span<const float> values, const std::map<std::string, std::string>& metadata) {
  std::filesystem::create_directories(file.parent_path());
  const model::FlatRange covered{first, first + static_cast<int64_t>(values.size())};
  std::vector<checkpoint::TensorView> views;
  for (const model::ParamTensor& t : layout.tensors()) {
    if (!covered.contains(t.range())) continue;
    views.push_back(checkpoint::TensorView::f32(t.name, t.shape, values.subspan(t.offset - first, t.numel)));
  }
  checkpoint::write_safetensors(file, views, metadata);
}

}  // namespace parlab::train
