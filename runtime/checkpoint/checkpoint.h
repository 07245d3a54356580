#pragma once
// Everything a trainer needs from the checkpoint library, in one include:
//   save_checkpoint / load_checkpoint   (save.h, load.h)  collective over a Coordinator
//   TrainingState, TensorSlice, replica_share, even_range  (state.h)
//   Manifest                            (manifest.h)
//   list_checkpoints, apply_retention   (layout.h)
//   corrupt_byte                        (file_io.h)       fault injection
//   young_daly_interval_seconds         (young_daly.h)
// safetensors.h is usable on its own (e.g. for --dump-step).
#include "runtime/checkpoint/coordinator.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/layout.h"
#include "runtime/checkpoint/load.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/save.h"
#include "runtime/checkpoint/state.h"
#include "runtime/checkpoint/young_daly.h"
