#include "strategy/partition.h"

#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::strategy {

std::vector<LayerRange> virtual_stages(const ModelSpec& model, const Plan& plan) {
  return virtual_stages(model.layer_list(), plan);
}

std::vector<LayerRange> virtual_stages(const std::vector<LayerSpec>& layers, const Plan& plan) {
  const int n = int(layers.size());
  // Block indices are the contiguous run of kBlock entries.
  int first_block = 0;
  while (first_block < n && layers[first_block].kind != LayerKind::kBlock) ++first_block;
  int blocks = 0;
  while (first_block + blocks < n && layers[first_block + blocks].kind == LayerKind::kBlock) ++blocks;

  const int v = plan.v > 0 ? plan.v : 1;
  const int k_total = plan.pp * v;
  std::vector<LayerRange> out(k_total);
  int next = first_block;
  for (int k = 0; k < k_total; ++k) {
    const int take = blocks / k_total + (k < blocks % k_total ? 1 : 0);
    out[k].begin = next;
    out[k].end = next + take;
    next += take;
  }
  out.front().begin = 0;  // embedding (if any) joins the first virtual stage
  out.back().end = n;     // head joins the last
  return out;
}

std::vector<LayerRange> stage_chunks(const ModelSpec& model, const Plan& plan, int stage) {
  return stage_chunks(model.layer_list(), plan, stage);
}

std::vector<LayerRange> stage_chunks(const std::vector<LayerSpec>& layers, const Plan& plan, int stage) {
  return stage_chunks(virtual_stages(layers, plan), plan, stage);
}

std::vector<LayerRange> stage_chunks(const std::vector<LayerRange>& all, const Plan& plan, int stage) {
  std::vector<LayerRange> out;
  for (size_t k = stage; k < all.size(); k += plan.pp) out.push_back(all[k]);
  return out;
}

}  // namespace parlab::strategy
