#pragma once
// Checkpoints of a tensor- or pipeline-parallel trainer (trainer_checkpoint.h's format; this
// file only says who writes and reads which elements).
//
// A rank holds, of each global tensor of its stage, its tensor-parallel slice: fc1's rows and
// bias entries are one contiguous run of the global tensor, fc2.weight's columns one run per
// row, and the replicated tensors (fc2.bias, head) the whole tensor. So a rank's piece of a
// tensor is written as the runs of the GLOBAL tensor it covers, and the checkpoint holds exactly
// the tensors a one-worker checkpoint holds: it resumes under any other split, and any
// checkpoint resumes under this one.
//
// Writers, so that every element is written once: the first data-parallel replica (dp = 0);
// of a tensor every tensor-parallel rank holds whole, tp rank 0. Every rank reads all it holds.
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/trainer.h"

namespace parlab::train::split_checkpoint {

// Whether the trainer's model is cut by tensor or pipeline parallelism (else the replica and
// ZeRO code paths of trainer_checkpoint.cpp apply).
bool applies(const Trainer& t);

// Global tensor names in checkpoint order: parameters in the whole network's layout order,
// then each parameter's optimizer buffers.
std::vector<std::string> tensor_order(const Trainer& t);

// This rank's share of the state to write: at most one run per global tensor (the checkpoint
// library takes one slice per tensor and rank). fc2.weight's columns are not one run, so its
// tensor-parallel group all-gathers it and each rank writes an even share of its rows; under ZeRO
// the data-parallel group first gathers each rank's whole local optimizer state. A collective
// over both groups; the slices borrow `storage` and the trainer's buffers.
struct SaveSet {
  std::list<std::vector<float>> storage;
  std::vector<checkpoint::TensorSlice> slices;
};
SaveSet save_set(const Trainer& t);

// Everything this rank holds, as reads of the global tensors.
std::vector<checkpoint::ReadRequest> requests(Trainer& t);

// The xxh3_64 of every global tensor of the state, in checkpoint order, gathered over the world
// one buffer at a time (the parameters, then each optimizer buffer) and hashed in place: a
// collective, for fingerprints that do not depend on the split. A rank holds one whole buffer at
// a time: gathering the whole state at once (and a copy of each tensor) took every pipeline rank
// of a 39 M-parameter MLP to 1.18 GB resident at the end of its run, against 212 MB of training
// state, and its page faults to seconds.
std::vector<std::pair<std::string, uint64_t>> hash_full_state(const Trainer& t);

}  // namespace parlab::train::split_checkpoint
