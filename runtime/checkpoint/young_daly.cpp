#include "runtime/checkpoint/young_daly.h"

#include <cmath>
#include <string>

#include "base/errors.h"

namespace parlab::checkpoint {

double young_daly_interval_seconds(double checkpoint_cost_seconds, double mtbf_seconds) {
  if (!(checkpoint_cost_seconds > 0) || !std::isfinite(checkpoint_cost_seconds)) {
    throw ConfigError("checkpoint_cost_seconds", std::to_string(checkpoint_cost_seconds),
                      "must be a finite number > 0");
  }
  if (!(mtbf_seconds > 0) || !std::isfinite(mtbf_seconds)) {
    throw ConfigError("mtbf_seconds", std::to_string(mtbf_seconds), "must be a finite number > 0");
  }
  return std::sqrt(2.0 * checkpoint_cost_seconds * mtbf_seconds);
}

}  // namespace parlab::checkpoint
