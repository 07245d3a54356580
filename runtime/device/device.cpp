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
  if (plan.tp > 1)
    throw ConfigError("plan.tp", std::to_string(plan.tp),
                      "must be 1 with --device cuda: the CUDA model holds whole layers, not tensor-parallel "
                      "slices, so far (tensor parallelism runs on --device cpu)");
  if (plan.pp > 1)
    throw ConfigError("plan.pp", std::to_string(plan.pp),
                      "must be 1 with --device cuda: the CUDA model holds every layer, not pipeline stages, so far "
                      "(pipelines run on --device cpu)");
  if (plan.dp > 1 && plan.zero >= 2 && plan.optimizer == strategy::OptimizerKind::kSgd)
    throw ConfigError("plan.optimizer", "sgd",
                      "must be adam with --device cuda and ZeRO-" + std::to_string(plan.zero) +
                          ": the shards live in GPU memory and only AdamW updates there (SGD runs on --device cpu)");
}

}  // namespace parlab::device
