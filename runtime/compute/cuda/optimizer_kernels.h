#pragma once
// Optimizer updates on DEVICE pointers, stream-ordered: the device half of train::AdamW
// (runtime/train/optimizer.h), so a GPU run keeps its optimizer state on the GPU and a step
// moves no gradient or parameter across PCIe.
//
// Bit-identical to the CPU pass: every element goes through the same fp32 operations in the same
// order as adamw_pass in runtime/train/optimizer.cpp (that file is compiled with
// -ffp-contract=off, this one with -fmad=false; each operation is also spelled with its IEEE
// round-to-nearest intrinsic, so neither a compiler flag nor fast-math can change the rounding).
// Element-wise, no reduction: the result does not depend on the launch shape or the GPU.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace parlab::compute::cuda {

// The fp32 scalars of one step, as train::AdamW::step_scalars() computes them on the host.
struct AdamWScalars {
  float step_size = 0;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t)
  float decay = 1;                  // 1 - lr * weight_decay
  float w = 0;                      // 1 - beta1
  float beta2 = 0;
  float one_minus_beta2 = 0;
  float eps = 0;
  bool decays = false;  // multiply p by decay first
  bool near_m = false;  // torch.lerp's form exact at m (w < 0.5), else the one exact at g
};

// One AdamW step over n elements: p, m (exp_avg), v (exp_avg_sq) updated in place from g.
// All four are device pointers of n floats; n == 0 is a no-op.
void adamw_step(cudaStream_t stream, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& k);

}  // namespace parlab::compute::cuda
