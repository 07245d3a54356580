#pragma once
// What a plan splits, in the seed's vocabulary: the set of remedies it uses beyond plain DDP, and
// the one family it belongs to. One definition for the lesson, the decide experiment and compare.
#include <string>

#include "strategy/plan.h"

namespace parlab::strategy {

// Which of the seed's remedies beyond plain DDP a plan uses, as bits: ZeRO sharding (zero > 0),
// tensor parallelism (tp > 1), pipeline parallelism (pp > 1); 0 is plain DDP. The lesson's
// "choose the smallest split" asks for this set and the planner's smallest fitting plan answers.
enum SplitAxis : int { kSplitZero = 1, kSplitTensor = 2, kSplitPipeline = 4 };
int split_axes(const Plan& plan);
// "DDP", "ZeRO", "tensor + pipeline", ...
std::string split_axes_name(int axes);
// The family a plan is counted in, by its most structural split: "pipeline" (pp > 1), else
// "tensor" (tp > 1), else "ZeRO" (zero > 0), else "DDP".
std::string plan_family(const Plan& plan);

}  // namespace parlab::strategy
