#pragma once
// `parlab train --dump-step DIR`: one step's tensors as safetensors, to check the runtime against
// an independent implementation (PyTorch loads these files directly).
//
//   inputs.safetensors   inputs.mb<k> (B_k, h) F32, labels.mb<k> (B_k) I64, indices.mb<k> (B_k)
//                        I64 (dataset sample indices) for each of the rank's microbatches k
//                        (B_k may be 0 on a short last batch)
//   weights.safetensors  every parameter, PyTorch names and shapes, BEFORE the update
//   grads.safetensors    the gradients the optimizer applies: summed over microbatches and over
//                        the data-parallel group, scaled by 1/global_batch
//
// Metadata (strings): rank, world, step, global_batch, microbatches, plan, model shape, seed.
// Several ranks write one folder each: DIR/rank-<r>; a single rank writes DIR itself.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/model/microbatch.h"
#include "runtime/model/param_layout.h"

namespace parlab::train {

std::filesystem::path dump_dir_for_rank(const std::filesystem::path& dir, int rank, int world);

// Writes inputs.safetensors. indices[k] are microbatch k's dataset indices; mbs[k] holds its
// inputs (activation(0), `width` = h features per sample) and labels. Throws RuntimeError /
// checkpoint errors on I/O failure.
void write_dump_inputs(const std::filesystem::path& dir, int64_t width, std::span<model::MicrobatchState> mbs,
                       const std::vector<std::vector<int64_t>>& indices,
                       const std::map<std::string, std::string>& metadata);

// Writes `file` (weights.safetensors or grads.safetensors) with every parameter of `layout`
// inside the flat range covered by `values` (first element = flat offset `first`).
void write_dump_tensors(const std::filesystem::path& file, const model::ParamLayout& layout, int64_t first,
                        std::span<const float> values, const std::map<std::string, std::string>& metadata);

}  // namespace parlab::train
