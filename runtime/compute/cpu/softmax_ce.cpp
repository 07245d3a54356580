#include <cmath>
#include <string>

#include "runtime/compute/cpu/kernels.h"
#include "base/errors.h"

namespace parlab::compute::cpu {

void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits, const int32_t* labels, int64_t B,
                                   int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    const int32_t label = labels[b];
    if (label < 0 || label >= C) {
      throw RuntimeError("softmax_cross_entropy_forward: label " + std::to_string(label) + " of row " +
                         std::to_string(b) + " is outside [0, " + std::to_string(C) + ")");
    }
    const float* row = logits + b * C;
    float* prow = probs + b * C;
    // Subtract the max so exp never overflows; the sum is kept in double so the loss of a
    // confident prediction keeps its digits.
    float maxval = row[0];
    for (int64_t c = 1; c < C; ++c) maxval = std::fmax(maxval, row[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      prow[c] = std::exp(row[c] - maxval);
      sum += prow[c];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < C; ++c) prow[c] *= inv_sum;
    // -log softmax = log(sum exp(l - max)) - (l_label - max)
    losses[b] = static_cast<float>(std::log(sum) - (row[label] - maxval));
  }
}

void softmax_cross_entropy_backward(float* dlogits, GradWrite write, const float* probs, const int32_t* labels,
                                    float loss_scale, int64_t B, int64_t C) {
  const bool add = write == GradWrite::kAccumulate;
  for (int64_t b = 0; b < B; ++b) {
    const float* prow = probs + b * C;
    float* drow = dlogits + b * C;
    for (int64_t c = 0; c < C; ++c) {
      const float indicator = (c == labels[b]) ? 1.0f : 0.0f;
      const float d = (prow[c] - indicator) * loss_scale;
      drow[c] = add ? drow[c] + d : d;
    }
  }
}

}  // namespace parlab::compute::cpu
