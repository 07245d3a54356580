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
  if (kind == Kind::kCuda && plan.tp > 1)
    throw ConfigError("plan.tp", std::to_string(plan.tp),
                      "must be 1 with --device cuda: the GPU runtime trains DDP so far (tensor parallelism runs on "
                      "--device cpu)");
  if (kind == Kind::kCuda && plan.pp > 1)
    throw ConfigError("plan.pp", std::to_string(plan.pp),
                      "must be 1 with --device cuda: the GPU runtime trains DDP so far (pipelines run on --device cpu)");
  if (kind == Kind::kCuda && plan.dp > 1 && plan.zero > 0)
    throw ConfigError("plan.zero", std::to_string(plan.zero),
                      "must be 0 with --device cuda: the GPU runtime trains DDP so far (ZeRO runs on --device cpu)");
}

}  // namespace parlab::device
