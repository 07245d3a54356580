#pragma once
// How often to checkpoint.
//
// With checkpoint cost C (seconds to save) and mean time between failures M, saving every τ
// seconds wastes about C/τ of the time on saves and, per failure, τ/2 of recomputation on
// average, i.e. a fraction  w(τ) ≈ C/τ + τ/(2M).  dw/dτ = 0 gives the first-order optimum
//
//   τ_opt = sqrt(2 · C · M)
//
// J. W. Young, "A first order approximation to the optimum checkpoint interval",
// Communications of the ACM 17(9), 1974; refined by J. T. Daly, "A higher order estimate of the
// optimum checkpoint interval for restart dumps", Future Generation Computer Systems 22(3), 2006.
// Valid only when C << M (Daly's higher-order terms matter once C is a sizeable fraction of M;
// for C >= M/2 Daly recommends τ = M). Restart time does not enter the first-order formula.
namespace parlab::checkpoint {

// sqrt(2 · checkpoint_cost_seconds · mtbf_seconds). Throws ConfigError unless both are > 0.
double young_daly_interval_seconds(double checkpoint_cost_seconds, double mtbf_seconds);

}  // namespace parlab::checkpoint
