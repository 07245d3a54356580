#include "runtime/device/device.h"

#include "strategy/errors.h"

namespace parlab::device {

Kind parse_kind(std::string_view text, const std::string& field) {
  if (text == "cpu") return Kind::kCpu;
  if (text == "cuda") return Kind::kCuda;
  throw ConfigError(field, std::string(text), "one of cpu, cuda");
}

std::string_view to_string(Kind kind) { return kind == Kind::kCuda ? "cuda" : "cpu"; }

void require_available(Kind kind) {
  if (const std::string why = unavailable_reason(kind); !why.empty())
    throw ConfigError("--device", std::string(to_string(kind)), why);
}

void check_plan(Kind kind, const strategy::Plan& plan) {
  if (kind != Kind::kCuda) return;
  // Tensor slices and pipeline stages run on the GPU (compute/cuda/cuda_model.h); what they do
  // not combine with there yet is refused by its key.
  if (plan.pp > 1 && plan.schedule == strategy::Schedule::kInterleaved)
    throw ConfigError("plan.schedule", "interleaved",
                      "must be gpipe or 1f1b with --device cuda and pp > 1: the CUDA model holds one layer span per "
                      "stage, not interleaved chunks, so far (interleaving runs on --device cpu)");
  if ((plan.tp > 1 || plan.pp > 1) && plan.zero >= 2)
    throw ConfigError("plan.zero", std::to_string(plan.zero),
                      "must be 0 or 1 with --device cuda and tp or pp > 1: ZeRO-2/3 buffers are not bound to "
                      "tensor slices or stages on the GPU yet (they run on --device cpu)");
  if (plan.dp > 1 && plan.zero >= 2 && plan.optimizer == strategy::OptimizerKind::kSgd)
    throw ConfigError("plan.optimizer", "sgd",
                      "must be adam with --device cuda and ZeRO-" + std::to_string(plan.zero) +
                          ": the shards live in GPU memory and only AdamW updates there (SGD runs on --device cpu)");
}

}  // namespace parlab::device
