#include "experiments/lib/predict_cluster.h"

#include <algorithm>
#include <cstdio>

#include "strategy/io.h"

namespace parlab::experiments {

WorkloadRates::WorkloadRates(const strategy::ClusterSpec& base, const strategy::ModelSpec& model,
                             std::function<void(const std::string&)> progress)
    : base_(base), model_(model), progress_(std::move(progress)) {
  if (base_.calibrated && model_.kind == strategy::ModelKind::kMlp)
    stored_ = load_stored_calibration(strategy::results_dir());
  // Only with a calibration `parlab calibrate` made (its details beside the TOML): a cpu-local
  // written by hand keeps its own figures.
  profiles_ = stored_ && base_.name == "cpu-local";
}

const WorkloadProfile& WorkloadRates::profile(const strategy::Plan& p, int world) {
  // The weight-gradient group too: DDP's steps group their products, ZeRO-2/3's of the same shape do
  // not; and the step's microbatches and schedule: a pipeline stage's order (microbatches_in_flight).
  const auto key = std::make_tuple(p.microbatch, p.tp, p.pp, int(p.precision), world, bf16_copies_per_pass(p),
                                   strategy::weight_grad_group(p), p.microbatches, int(p.schedule));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (progress_)
    progress_("  profiling the workload: microbatch " + std::to_string(p.microbatch) +
              (p.tp > 1 ? ", a 1/" + std::to_string(p.tp) + " slice" : std::string()) +
              (p.pp > 1 ? ", a 1/" + std::to_string(p.pp) + " stage" : std::string()) + " on " + std::to_string(world) +
              " process" + (world > 1 ? "es" : "") + " in lockstep ...");
  return cache_.emplace(key, profile_workload(model_, p, world)).first->second;
}

void WorkloadRates::measure_links_now(int world, bool quick) {
  if (!profiles_ || world < 2) return;
  if (progress_) progress_("  measuring the links of " + std::to_string(world) + " ranks again ...");
  const LinkFits fits = measure_links(world, quick);
  auto& rings = stored_->ring_fits;
  rings.erase(std::remove_if(rings.begin(), rings.end(), [&](const RingFit& f) { return f.ranks == world; }),
              rings.end());
  rings.push_back(fits.ring);
  std::sort(rings.begin(), rings.end(), [](const RingFit& a, const RingFit& b) { return a.ranks < b.ranks; });
  auto& sharded = stored_->sharded_fits;
  sharded.erase(std::remove_if(sharded.begin(), sharded.end(), [&](const ShardedFit& f) { return f.ranks == world; }),
                sharded.end());
  sharded.insert(sharded.end(), fits.sharded.begin(), fits.sharded.end());
  char b[200];
  std::snprintf(b, sizeof b,
                "; the links of %d ranks measured again this round (all-reduce a = %.0f us, B = %.2f GB/s)", world,
                fits.ring.latency_seconds * 1e6, fits.ring.link_bytes_per_s / 1e9);
  links_note_[world] = b;
}

PredictionCluster WorkloadRates::for_plan(const strategy::Plan& p, int world) {
  PredictionCluster out;
  const std::string flagged = stored_ && !stored_->trusted ? " -- the calibration is FLAGGED" : "";
  strategy::ClusterSpec rated = base_;
  if (profiles_) {
    const WorkloadProfile& prof = profile(p, world);
    rated = cluster_for_profile(base_, model_, p, prof);
    const auto links = links_note_.find(world);
    out.note = describe(prof, rated, p) + " (" + stored_->created_at + ")" +
               (links == links_note_.end() ? std::string() : links->second) + flagged;
  } else if (stored_ && !stored_->grid.empty()) {
    rated = cluster_for_workload(base_, stored_->grid, p.microbatch, model_.hidden, model_.ffn / p.tp);
    char b[240];
    std::snprintf(b, sizeof b,
                  "compute model: the calibration's GEMM-rate grid (%s) at microbatch %lld, %lld x %lld: %.1f GFLOP/s",
                  stored_->created_at.c_str(), (long long)p.microbatch, (long long)model_.hidden,
                  (long long)(model_.ffn / p.tp), rated.device.peak_flops_fp32 / 1e9);
    out.note = b + flagged;
  } else {
    out.note = base_.calibrated ? "compute model: the calibrated single rate (no rate grid stored)"
                                : "compute model: the cluster preset's peak x gemm_efficiency (not calibrated)";
  }
  // The link from the fit of `world` ranks; predicted on the cluster exactly as its proof records
  // it (the profile's rates are measured doubles, the TOML keeps 10 significant digits).
  rated = cluster_for_world(rated, stored_ ? stored_->ring_fits : std::vector<RingFit>{}, world,
                            stored_ ? stored_->sharded_fits : std::vector<ShardedFit>{});
  out.recorded = strategy::parse_cluster_toml(strategy::cluster_to_toml(rated, ""), "recorded cluster");
  out.cluster = strategy::with_world(out.recorded, world);
  return out;
}

}  // namespace parlab::experiments
