#pragma once
// A Trainer's complete state in a checkpoint, and a Trainer resumed from one.
//
// What a checkpoint of a Trainer holds: everything step() reads that training changes, so that a
// resumed run continues exactly as if nothing had happened.
//
//   tensors   every parameter under its PyTorch name and global shape ("blocks.0.fc1.weight"
//             (f, h)), then every optimizer buffer per parameter ("blocks.0.fc1.weight.exp_avg",
//             ".exp_avg_sq" for AdamW, ".momentum_buffer" for SGD with momentum), fp32
//   metadata  {"format": "parlab-trainer-state", "format_version": 1, "step": s,
//              "sampler":   {"epoch", "consumed", "dataset_size", "global_batch"},
//              "rng":       {"generator": "splitmix64-counter", "seed", "epoch", "consumed"},
//              "optimizer": {"kind", "step", "config": {lr, ...}},
//              "model": ModelSpec JSON, "model_hash": json_fingerprint(shape),
//              "plan": Plan JSON, "plan_hash", "world_size": W, "seed", "data_size",
//              "software_version"}
//   RNG: every random number is CounterRng(seed, stream, counter) with the counter derived from
//   the sample index, the flat parameter offset or the epoch (runtime/compute/counter_rng.h), so
//   the seed plus the sampler's (epoch, consumed) IS the whole generator state.
//
// DDP: every rank holds the whole state, so rank r writes only its share
// checkpoint::even_range(total, W, r) of the concatenated flat state (tensors in the order above,
// cut at tensor boundaries): W files written in parallel, each 1/W of the bytes.
// ZeRO: rank r writes the pieces of every tensor inside its shard (train/shards.h), parameters
// and optimizer state alike; the files hold the same global tensors as a DDP checkpoint.
// Resume: every rank reads what it keeps (a replica reads everything, a ZeRO rank its shard)
// from however many files hold it, so a checkpoint written by N workers with one split loads
// into M workers with another (zero=3 on 4 resumes as zero=1 on 2, as DDP, as one worker; the
// elastic sampler keeps the sample order; the plan's global batch stays fixed, its accumulation
// steps change).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/trainer.h"

namespace parlab::train {

// The checkpoint library's collective calls over a real Communicator. all_gather of strings is
// two float all-gathers (lengths, then the bytes padded to the longest), bit-exact because Gloo's
// all-gather copies bytes. Every call waits at most `timeout`: a rank may wait for the slowest
// peer's whole shard write, so this is longer than a training collective's timeout.
class CommCoordinator final : public checkpoint::Coordinator {
 public:
  CommCoordinator(comm::Communicator& comm, std::chrono::milliseconds timeout);
  int rank() const override;
  int world_size() const override;
  void barrier() override;
  std::vector<std::string> all_gather(const std::string& mine) override;

 private:
  comm::Communicator& comm_;
  comm::CollectiveOptions options_;
};

// The checkpoint refers to another job (model shape, seed, dataset or optimizer kind differ).
class CheckpointMismatch : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// The metadata object described above, for the trainer's current state.
nlohmann::json trainer_metadata(const Trainer& trainer);

// Rank `rank` of `world`'s share of the trainer's state (borrows the trainer's buffers; valid
// until the next step()). Under ZeRO each rank saves the pieces of every tensor inside its shard
// (parameters and optimizer state), whatever `world`.
std::vector<checkpoint::TensorSlice> trainer_slices(const Trainer& trainer, int world, int rank);

// Collective over `coord` (the trainer's world): saves the state after trainer.state().step.
checkpoint::SaveResult save_trainer(const Trainer& trainer, const checkpoint::SaveOptions& options,
                                    checkpoint::Coordinator& coord);

struct ResumeResult {
  checkpoint::LoadResult load;     // which checkpoint was used, which were skipped and why
  bool resumed = false;            // false: nothing usable, the trainer is untouched (step 0)
  int64_t step = 0;                // the trainer's step now
  int written_by_world = 0;        // ranks that wrote the checkpoint used
  std::vector<std::string> notes;  // e.g. "written by 2 workers, resumed by 1: ..."
  // "resumed from step 120 (RUN/checkpoints/step-000120); skipped step 140: checksum mismatch ..."
  std::string summary() const;
};

// Collective over `coord`: loads the newest checkpoint under options.root that verifies into
// `trainer` (parameters, optimizer buffers and step counter, sampler position, step). The data
// lands directly in the trainer's buffers during the verifying read. Throws CheckpointMismatch
// when the checkpoint belongs to another job (the trainer's state is then unspecified).
ResumeResult resume_trainer(Trainer& trainer, const checkpoint::LoadOptions& options, checkpoint::Coordinator& coord);

// XXH3_64bits of every tensor of the trainer's state (parameters and optimizer buffers, named as
// in a checkpoint) and one combined hash over those, the step counters and the sampler position.
// Two runs with equal combined hashes ended in the same training state, bit for bit.
struct StateFingerprint {
  int64_t step = 0;
  int64_t optimizer_step = 0;
  SamplerState sampler;
  std::vector<std::pair<std::string, uint64_t>> tensors;  // checkpoint order
  uint64_t combined = 0;

  std::string combined_hex() const;
  nlohmann::json to_json() const;
  static StateFingerprint from_json(const nlohmann::json& j);  // throws ConfigError
};
// Under ZeRO a collective over the trainer's DP group (the shards are gathered first), so the
// fingerprint of a state does not depend on how it is sharded: every rank must call it.
StateFingerprint state_fingerprint(const Trainer& trainer);

// The same fingerprint computed from a checkpoint's tensors and metadata (a resumed run's final
// checkpoint can be compared with a live trainer's state).
StateFingerprint state_fingerprint(const checkpoint::TrainingState& state);

}  // namespace parlab::train
