#include "runtime/device/device.h"

#include "runtime/device/backend.h"
#include "base/errors.h"

namespace parlab::device {

Kind parse_kind(std::string_view text, const std::string& field) {
  if (text == "cpu") return Kind::kCpu;
  if (text == "cuda") return Kind::kCuda;
  throw ConfigError(field, std::string(text), "one of cpu, cuda");
}

std::string_view to_string(Kind kind) { return kind == Kind::kCuda ? "cuda" : "cpu"; }

// Asking about cuda loads the backend (backend.h): the one place a CPU program maps CUDA.
std::string unavailable_reason(Kind kind) {
  if (kind == Kind::kCpu) return "";
  std::string why;
  const CudaBackend* backend = cuda_backend(&why);
  return backend ? backend->unavailable_reason() : why;
}

CudaRank open_cuda_rank(std::shared_ptr<comm::Store> store, int rank, int size, int local_rank,
                        const CudaRankOptions& options) {
  std::string why;
  const CudaBackend* backend = cuda_backend(&why);
  if (backend == nullptr) throw ConfigError("--device", "cuda", why);
  return backend->open_rank(std::move(store), rank, size, local_rank, options);
}

void require_available(Kind kind) {
  if (const std::string why = unavailable_reason(kind); !why.empty())
    throw ConfigError("--device", std::string(to_string(kind)), why);
}

void check_plan(Kind kind, const strategy::Plan& plan) {
  if (kind != Kind::kCuda) return;
  // Every split the CPU runtime trains runs on the GPU too (the trainer refuses the rest by key
  // on either device); only SGD under ZeRO-2/3 is the GPU's own refusal.
  if (plan.dp > 1 && plan.zero >= 2 && plan.optimizer == strategy::OptimizerKind::kSgd)
    throw ConfigError("plan.optimizer", "sgd",
                      "must be adam with --device cuda and ZeRO-" + std::to_string(plan.zero) +
                          ": the shards live in GPU memory and only AdamW updates there (SGD runs on --device cpu)");
}

}  // namespace parlab::device
