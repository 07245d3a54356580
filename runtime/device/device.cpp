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
  if (plan.dp > 1 && plan.zero >= 2)
    throw ConfigError("plan.zero", std::to_string(plan.zero),
                      "must be 0 or 1 with --device cuda: ZeRO-2/3 gradient and parameter shards are not placed "
                      "on the GPU yet (ZeRO-2/3 run on --device cpu)");
}

}  // namespace parlab::device
