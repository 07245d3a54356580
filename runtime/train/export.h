#pragma once
// The whole model out of its shards: for `parlab train --export FILE.safetensors`, for tests
// that compare a sharded run with one worker, and for anything else that needs every weight.
//
// Under ZeRO-3 no rank holds the whole model: gather_full_params all-gathers the shards over
// the data-parallel group (a collective: every member calls it). Every other stage already
// holds a replica, which is copied. Under tensor or pipeline parallelism each rank holds slices
// of a stage: the gather is then over every rank (a collective of the world), each slice put at
// its place in the whole network.
//
// The exported file is safetensors with every parameter under its PyTorch name and shape
// ("blocks.0.fc1.weight" (f, h), ..., "head.bias" (C)): the state_dict of
//   nn.Module(blocks = ModuleList([Block(fc1 = Linear(h, f), fc2 = Linear(f, h))] * L),
//             head = Linear(h, C))
// so `model.load_state_dict(safetensors.torch.load_file(FILE))` loads it. Metadata records the
// format, the step, the plan and the model shape.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "runtime/train/trainer.h"

namespace parlab::train {

// Collective over trainer.dp_comm() (the world's under tensor or pipeline parallelism): the
// whole model's flat parameters, in the whole network's layout order.
std::vector<float> gather_full_params(const Trainer& trainer);

// Collective over the world of a tensor- or pipeline-parallel trainer: `local` is a buffer laid
// out as the rank's whole local parameters (the model's flat buffer, or an optimizer buffer over
// it); returns the same buffer for the whole network, in its layout order.
std::vector<float> gather_split_buffer(const Trainer& trainer, std::span<const float> local, const std::string& tag);
// The same into `full` (the whole network's size; every element is written), for callers that
// gather one buffer after another into the same storage.
void gather_split_buffer(const Trainer& trainer, std::span<const float> local, const std::string& tag,
                         std::span<float> full);

// Collective over trainer.dp_comm(): gathers, then the group's rank 0 writes `file` (atomically:
// a temporary beside it, renamed). Returns the bytes written (0 on other ranks).
uint64_t export_safetensors(const Trainer& trainer, const std::filesystem::path& file);

}  // namespace parlab::train
