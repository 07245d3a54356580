#pragma once
// Pipeline partition: which entries of ModelSpec::layer_list() each pipeline stage (and, when
// interleaved, each of its v model chunks) owns.
//
// Blocks are divided as evenly as possible over the K = pp * v virtual stages (the first
// `blocks % K` virtual stages take one extra); the embedding joins virtual stage 0 and the head
// the last one, as Megatron places them. Virtual stage k lives on pipeline stage k % pp, as chunk
// k / pp of it (Narayanan et al. SC'21, interleaved 1F1B).
#include <vector>

namespace parlab::strategy {

struct ModelSpec;
struct Plan;
struct LayerSpec;

struct LayerRange {
  int begin = 0;  // index into ModelSpec::layer_list()
  int end = 0;    // one past the last
  int size() const { return end - begin; }
  bool contains(int layer) const { return layer >= begin && layer < end; }
};

// One range per chunk (size v; chunk c is virtual stage c * pp + stage).
std::vector<LayerRange> stage_chunks(const ModelSpec& model, const Plan& plan, int stage);
// All virtual stages in pipeline order (size pp * v).
std::vector<LayerRange> virtual_stages(const ModelSpec& model, const Plan& plan);
// The same from a layer list already built (the planner evaluates thousands of plans).
std::vector<LayerRange> virtual_stages(const std::vector<LayerSpec>& layers, const Plan& plan);
std::vector<LayerRange> stage_chunks(const std::vector<LayerSpec>& layers, const Plan& plan, int stage);
// The same from virtual_stages() already computed (once for every stage of a plan).
std::vector<LayerRange> stage_chunks(const std::vector<LayerRange>& virtual_stages, const Plan& plan, int stage);

}  // namespace parlab::strategy
