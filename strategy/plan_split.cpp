#include "strategy/plan_split.h"

namespace parlab::strategy {

int split_axes(const Plan& p) {
  return (p.zero > 0 ? kSplitZero : 0) | (p.tp > 1 ? kSplitTensor : 0) | (p.pp > 1 ? kSplitPipeline : 0);
}

std::string split_axes_name(int axes) {
  std::string s;
  const auto add = [&](const char* name) { s += (s.empty() ? "" : " + ") + std::string(name); };
  if (axes & kSplitZero) add("ZeRO");
  if (axes & kSplitTensor) add("tensor");
  if (axes & kSplitPipeline) add("pipeline");
  return s.empty() ? "DDP" : s;
}

std::string plan_family(const Plan& p) {
  const int axes = split_axes(p);
  if (axes & kSplitPipeline) return "pipeline";
  if (axes & kSplitTensor) return "tensor";
  return axes & kSplitZero ? "ZeRO" : "DDP";
}

}  // namespace parlab::strategy
