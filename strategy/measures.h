#pragma once
// Run-level measures, each with one estimator chosen here for the whole tree: `parlab compare`,
// the batch runner's tables, the grader and the desktop lab call these and nothing else.
//
//   speedup      throughput ratio of a run against a baseline at the recorded global batches,
//                (gbs / t) / (gbs_base / t_base); at a fixed global batch t_base / t.
//                Estimator: the MEDIAN OF PAIRED PER-ROUND RATIOS. Rounds are measured close in
//                time (kind = "scaling" alternates their order), so a machine that slows down
//                for a while slows both members of a pair and the ratio survives; the ratio of
//                the two medians would mix a quiet round of one with a loud round of the other.
//                With one round each (or counts that cannot be paired) there is one ratio: the
//                medians' (the two estimators agree). Spread: half the interquartile range of
//                the paired ratios (0 for one ratio).
//   efficiency   speedup / (workers / base_workers)
//   relative error of a prediction   predicted / measured - 1 (signed; |.| where a bound is judged).
//                Estimator where a prediction was made anew in each round beside that round's
//                measurement (kind = "splits" with rounds: each round profiles again): the MEDIAN
//                OF PAIRED PER-ROUND ERRORS, for speedup's reason -- a prediction and a measurement
//                minutes apart share the machine's mood, one of them from another round does not.
//                Counts that cannot be paired (one prediction, several measured rounds): the
//                medians' error.
//   regret       of a choice against the best measured: 1 - throughput(choice) / throughput(best)
//                = 1 - t_best / t_choice at one global batch; 0 when the choice was the fastest
//   rank correlation   Spearman's rho of two series (ties take their average rank), the
//                Pearson correlation of the ranks
#include <map>
#include <string>
#include <vector>

#include "base/stats.h"

namespace parlab::strategy {

struct Measure {
  double value = 0;
  double spread = 0;  // half the interquartile range of the samples it is the median of
  int n = 0;          // samples (paired ratios) it was taken over
};

// `base` and `steps` are per-round step times (seconds) in round order; one element for a
// single measurement. Paired round by round when both have the same count, else the ratio of
// their medians. n = 0 (value 0) when either is empty or holds a non-positive time.
Measure speedup(const std::vector<double>& base_steps, const std::vector<double>& steps, double base_global_batch,
                double global_batch);
// The same for two single step times.
double speedup(double base_step, double step, double base_global_batch, double global_batch);

double efficiency(double speedup, int workers, int base_workers);

double relative_error(double predicted, double measured);
// Per-round predictions and measurements (round order; one element for a single one): paired
// round by round when the counts agree, else the error of their medians. n = 0 (value 0) when
// either is empty or a measurement is not positive.
Measure relative_error(const std::vector<double>& predicted_rounds, const std::vector<double>& measured_rounds);

// 1 - t_best / t_choice (both step seconds at one global batch); 0 when the choice is the best.
double regret(double choice_step, double best_step);

// Ranks 1..n of `v`, ties sharing their average rank.
std::vector<double> ranks(const std::vector<double>& v);
// Spearman's rank correlation of x and y (same length, at least 2); 0 when either is constant.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// A measured run that closed a series of rounds carries each round's step time as a run metric,
// "rounds.<r>.step_seconds" (r from 0, in round order), so every reader of the database pairs
// the same rounds: the name, and the reader of a run's metrics (empty: no rounds recorded).
std::string round_step_metric(int round);
std::vector<double> round_steps(const std::map<std::string, double>& metrics);

}  // namespace parlab::strategy
