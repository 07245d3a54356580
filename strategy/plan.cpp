#include "strategy/plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>

#include "strategy/cluster_spec.h"
#include "base/errors.h"
#include "base/key_values.h"
#include "strategy/model_spec.h"

namespace parlab::strategy {
namespace {

constexpr const char* kKeys =
    "dp, tp, pp, zero, mb, microbatches, gbs, schedule, v, recompute, sp, precision, mixed_state, "
    "optimizer, bucket_mb";

// Degrees and batch sizes; a product of three degrees must still fit an int.
constexpr int64_t kMaxDegree = 1 << 20;
constexpr int64_t kMaxBatch = int64_t{1} << 40;

int64_t parse_int(const std::string& key, const std::string& v, int64_t min, int64_t max) {
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == v.data() + v.size() && out > max))
    throw ConfigError("plan." + key, v, "must be at most " + std::to_string(max));
  if (ec != std::errc() || p != v.data() + v.size()) throw ConfigError("plan." + key, v, "must be an integer");
  if (out < min) throw ConfigError("plan." + key, v, "must be >= " + std::to_string(min));
  return out;
}

double parse_positive_double(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double out = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(out))
    throw ConfigError("plan." + key, v, "must be a number");
  if (!(out > 0)) throw ConfigError("plan." + key, v, "must be positive");
  return out;
}

template <typename E>
E parse_enum(const std::string& key, const std::string& v, std::initializer_list<std::pair<const char*, E>> options) {
  std::string allowed;
  for (const auto& [name, value] : options) {
    if (v == name) return value;
    allowed += allowed.empty() ? "" : " | ";
    allowed += name;
  }
  throw ConfigError("plan." + key, v, "must be one of " + allowed);
}

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

std::string_view to_string(Schedule s) {
  switch (s) {
    case Schedule::kGPipe:
      return "gpipe";
    case Schedule::k1F1B:
      return "1f1b";
    case Schedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}
std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}
std::string_view to_string(Precision p) { return p == Precision::kFp32 ? "fp32" : "mixed"; }
std::string_view to_string(OptimizerKind o) { return o == OptimizerKind::kAdam ? "adam" : "sgd"; }
std::string_view to_string(MixedState s) { return s == MixedState::kZero ? "zero" : "fp32-main"; }

std::string Plan::given_text() const {
  std::string out;
  for (const parlab::KeyValue& kv : parlab::split_key_values(to_string()))
    if (was_given(kv.key)) out += (out.empty() ? "" : ",") + kv.item;
  return out;
}

std::string Plan::to_string() const {
  // Unset (zero) fields are left out, so the text parses back to the same plan.
  std::ostringstream o;
  if (dp > 0) o << "dp=" << dp << ",";
  o << "tp=" << tp << ",pp=" << pp << ",zero=" << zero;
  if (microbatch > 0) o << ",mb=" << microbatch;
  if (microbatches > 0) o << ",microbatches=" << microbatches;
  if (global_batch > 0) o << ",gbs=" << global_batch;
  o << ",schedule=" << strategy::to_string(schedule);
  if (v > 0) o << ",v=" << v;
  o << ",recompute=" << strategy::to_string(recompute) << ",sp=" << (sequence_parallel ? "on" : "off")
    << ",precision=" << strategy::to_string(precision)
    << (precision == Precision::kMixed && (mixed_state != MixedState::kZero || was_given("mixed_state"))
            ? ",mixed_state=" + std::string(strategy::to_string(mixed_state))
            : std::string())
    << ",optimizer=" << strategy::to_string(optimizer) << ",bucket_mb=" << bucket_bytes / (1024.0 * 1024);
  return o.str();
}

std::string Plan::short_name() const {
  std::string s;
  auto add = [&](const std::string& part) { s += s.empty() ? part : " x " + part; };
  if (tp > 1) add("TP " + std::to_string(tp));
  if (pp > 1) add("PP " + std::to_string(pp));
  const std::string dp_name = zero > 0 ? "ZeRO-" + std::to_string(zero) : "DDP";
  if (s.empty()) return dp > 1 || zero > 0 ? dp_name + " x" + std::to_string(dp) : "single device";
  if (dp > 1) add((zero > 0 ? dp_name + " " : "DP ") + std::to_string(dp));
  return s;
}

bool Plan::was_given(std::string_view key) const {
  for (const auto& k : given)
    if (k == key) return true;
  return false;
}

RankCoords coords_of(const Plan& p, int rank) {
  RankCoords c;
  c.tp = rank % p.tp;
  c.dp = (rank / p.tp) % p.dp;
  c.pp = rank / (p.tp * p.dp);
  return c;
}

int rank_of(const Plan& p, RankCoords c) { return c.tp + p.tp * (c.dp + p.dp * c.pp); }

std::vector<int> dp_group(const Plan& p, int rank) {
  RankCoords c = coords_of(p, rank);
  std::vector<int> g;
  for (c.dp = 0; c.dp < p.dp; ++c.dp) g.push_back(rank_of(p, c));
  return g;
}
std::vector<int> tp_group(const Plan& p, int rank) {
  RankCoords c = coords_of(p, rank);
  std::vector<int> g;
  for (c.tp = 0; c.tp < p.tp; ++c.tp) g.push_back(rank_of(p, c));
  return g;
}
std::vector<int> pp_group(const Plan& p, int rank) {
  RankCoords c = coords_of(p, rank);
  std::vector<int> g;
  for (c.pp = 0; c.pp < p.pp; ++c.pp) g.push_back(rank_of(p, c));
  return g;
}

Plan parse_plan(std::string_view text, Plan plan) {
  for (const KeyValue& kv : split_key_values_strict(text, "plan")) {
    if (!kv.has_equals)
      throw ConfigError("plan", kv.item,
                        "expected key=value pairs separated by commas (keys: " + std::string(kKeys) + ")");
    const std::string& key = kv.key;
    const std::string& v = kv.value;
    if (v.empty()) throw ConfigError("plan." + key, "(empty)", "needs a value");
    if (!plan.was_given(key)) plan.given.push_back(key);
    if (key == "dp")
      plan.dp = int(parse_int(key, v, 1, kMaxDegree));
    else if (key == "tp")
      plan.tp = int(parse_int(key, v, 1, kMaxDegree));
    else if (key == "pp")
      plan.pp = int(parse_int(key, v, 1, kMaxDegree));
    else if (key == "zero") {
      // Parsed wide so that 7 gets the stage list as its reason, not a bare upper bound.
      plan.zero = int(parse_int(key, v, 0, kMaxDegree));
      if (plan.zero > 3) throw ConfigError("plan.zero", v, "must be 0, 1, 2 or 3");
    } else if (key == "mb")
      plan.microbatch = parse_int(key, v, 1, kMaxBatch);
    else if (key == "microbatches")
      plan.microbatches = parse_int(key, v, 1, kMaxBatch);
    else if (key == "gbs")
      plan.global_batch = parse_int(key, v, 1, kMaxBatch);
    else if (key == "v")
      plan.v = int(parse_int(key, v, 1, kMaxDegree));
    else if (key == "schedule")
      plan.schedule = parse_enum<Schedule>(
          key, v, {{"gpipe", Schedule::kGPipe}, {"1f1b", Schedule::k1F1B}, {"interleaved", Schedule::kInterleaved}});
    else if (key == "recompute")
      plan.recompute = parse_enum<Recompute>(
          key, v, {{"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}});
    else if (key == "sp")
      plan.sequence_parallel =
          parse_enum<bool>(key, v, {{"on", true}, {"off", false}, {"true", true}, {"false", false}});
    else if (key == "precision") {
      plan.precision = parse_enum<Precision>(key, v, {{"fp32", Precision::kFp32}, {"mixed", Precision::kMixed}});
    } else if (key == "mixed_state")
      plan.mixed_state =
          parse_enum<MixedState>(key, v, {{"zero", MixedState::kZero}, {"fp32-main", MixedState::kFp32Main}});
    else if (key == "optimizer")
      plan.optimizer =
          parse_enum<OptimizerKind>(key, v, {{"adam", OptimizerKind::kAdam}, {"sgd", OptimizerKind::kSgd}});
    else if (key == "bucket_mb")
      plan.bucket_bytes = parse_positive_double(key, v) * 1024 * 1024;
    else
      throw ConfigError("plan." + key, v, std::string("unknown key; allowed: ") + kKeys);
  }
  return plan;
}

int weight_grad_group(const Plan& p) {
  if (p.tp > 1 || p.pp > 1 || (p.dp > 1 && p.zero >= 2) || p.microbatch <= 0 || p.microbatches <= 1) return 1;
  const int64_t n = (kWeightGradGroupRows + p.microbatch - 1) / p.microbatch;
  return static_cast<int>(std::clamp<int64_t>(n, 1, p.microbatches));
}

bool meets_once_a_step(const Plan& p) { return p.tp == 1 && p.pp == 1 && p.zero <= 2; }

int64_t first_write_grad_elements(const ModelSpec& model, const Plan& plan) {
  // Groups imply tp = pp = 1: the rank holds every block's whole weights.
  if (model.kind != ModelKind::kMlp || weight_grad_group(plan) <= 1) return 0;
  return model.layers * 2 * model.hidden * model.ffn;
}

int64_t default_microbatches(int dp, int pp) {
  const int64_t replicas = std::max(dp, 1);
  return std::lcm(std::lcm<int64_t>(replicas, kReplicasSharingABatch) / replicas, std::max<int64_t>(pp, 1));
}

int64_t default_global_batch(const ModelSpec& model, int dp, int pp, int64_t microbatch) {
  const int64_t mb = microbatch > 0 ? microbatch : std::max<int64_t>(model.default_microbatch, 1);
  return mb * std::max(dp, 1) * default_microbatches(dp, pp);
}

namespace {

// gbs set, mb not: the largest microbatch up to the model's default that cuts each replica's
// share of gbs into a whole number of microbatches (a multiple of pp of them under a pipeline,
// `microbatches` of them when that was set too).
int64_t microbatch_for(const Plan& p, const ModelSpec& model) {
  const int64_t preferred = std::max<int64_t>(model.default_microbatch, 1);
  if (p.global_batch % p.dp != 0)
    throw ConfigError("plan.gbs", num(p.global_batch), "must be a multiple of dp (" + num(p.dp) + ")");
  const int64_t share = p.global_batch / p.dp;
  if (p.microbatches > 0) {
    if (share % p.microbatches != 0)
      throw ConfigError("plan.microbatches", num(p.microbatches),
                        "must divide gbs / dp (" + num(p.global_batch) + " / " + num(p.dp) + " = " + num(share) + ")");
    return share / p.microbatches;
  }
  for (int64_t mb = std::min(preferred, share); mb >= 1; --mb)
    if (share % mb == 0 && (share / mb) % std::max(p.pp, 1) == 0) return mb;
  throw ConfigError("plan.gbs", num(p.global_batch),
                    "gives each of dp = " + num(p.dp) + " replicas " + num(share) +
                        " samples, which no microbatch cuts into a multiple of pp = " + num(p.pp) + " microbatches");
}

}  // namespace

Plan resolve(Plan p, const ModelSpec& model, int world) {
  if (world <= 0) throw ConfigError("world", num(world), "must be a positive number of devices");
  if (world % (p.tp * p.pp) != 0)
    throw ConfigError("plan.tp*pp", num(p.tp * p.pp), "must divide the world size (" + num(world) + ")");
  if (p.dp == 0) p.dp = world / (p.tp * p.pp);
  if (p.microbatch == 0)
    p.microbatch = p.global_batch > 0 ? microbatch_for(p, model) : std::max<int64_t>(model.default_microbatch, 1);
  if (p.global_batch > 0) {
    const int64_t per_step = p.microbatch * p.dp;
    if (p.global_batch % per_step != 0)
      throw ConfigError(
          "plan.gbs", num(p.global_batch),
          "must be a multiple of mb * dp (" + num(p.microbatch) + " * " + num(p.dp) + " = " + num(per_step) + ")");
    const int64_t m = p.global_batch / per_step;
    if (p.microbatches != 0 && p.microbatches != m)
      throw ConfigError("plan.microbatches", num(p.microbatches),
                        "contradicts gbs / (mb * dp) = " + num(m) + "; give one of them");
    p.microbatches = m;
  }
  if (p.microbatches == 0) p.microbatches = default_microbatches(p.dp, p.pp);
  p.global_batch = p.microbatch * p.microbatches * p.dp;
  if (p.v == 0) p.v = p.schedule == Schedule::kInterleaved ? 2 : 1;
  if (!p.was_given("precision")) p.precision = model.default_precision;
  if (!p.was_given("mixed_state"))
    p.mixed_state = model.kind == ModelKind::kMlp ? MixedState::kFp32Main : MixedState::kZero;
  return p;
}

void validate(const Plan& p, const ModelSpec& model, const ClusterSpec& cluster) {
  const int world = p.dp * p.tp * p.pp;
  if (p.dp < 1) throw ConfigError("plan.dp", num(p.dp), "must be >= 1");
  if (world > cluster.devices())
    throw ConfigError("plan.dp*tp*pp", num(world),
                      "exceeds the cluster's " + num(cluster.devices()) + " devices (" + cluster.name + ")");
  if (world != cluster.devices())
    throw ConfigError("plan.dp*tp*pp", num(world), "must equal the world size (" + num(cluster.devices()) + ")");
  if (!model.has_layers() && (p.tp > 1 || p.pp > 1))
    throw ConfigError(p.tp > 1 ? "plan.tp" : "plan.pp", num(p.tp > 1 ? p.tp : p.pp),
                      "a bare parameter count has no layers to split; give a model shape or use dp/zero only");
  if (p.tp > 1) {
    if (model.kind == ModelKind::kTransformer) {
      const int64_t kv = model.kv_heads > 0 ? model.kv_heads : model.heads;
      if (model.heads % p.tp != 0)
        throw ConfigError("plan.tp", num(p.tp), "must divide heads (" + num(model.heads) + ")");
      if (kv % p.tp != 0) throw ConfigError("plan.tp", num(p.tp), "must divide kv_heads (" + num(kv) + ")");
      if (model.vocab % p.tp != 0)
        throw ConfigError("plan.tp", num(p.tp), "must divide vocab (" + num(model.vocab) + ")");
    }
    if (model.ffn % p.tp != 0) throw ConfigError("plan.tp", num(p.tp), "must divide ffn (" + num(model.ffn) + ")");
  }
  if (p.pp > 1 && p.pp > model.layers)
    throw ConfigError("plan.pp", num(p.pp), "must be <= layers (" + num(model.layers) + ")");
  if (p.microbatch < 1) throw ConfigError("plan.mb", num(p.microbatch), "must be >= 1");
  if (p.microbatches < 1) throw ConfigError("plan.microbatches", num(p.microbatches), "must be >= 1");
  if (p.schedule == Schedule::kInterleaved) {
    if (p.pp < 2) throw ConfigError("plan.schedule", "interleaved", "needs pp >= 2");
    if (p.v < 2) throw ConfigError("plan.v", num(p.v), "must be >= 2 for the interleaved schedule");
    if (model.layers % (int64_t(p.pp) * p.v) != 0)
      throw ConfigError("plan.v", num(p.v),
                        "pp * v (" + num(int64_t(p.pp) * p.v) + ") must divide layers (" + num(model.layers) + ")");
    if (p.microbatches % p.pp != 0)
      throw ConfigError("plan.microbatches", num(p.microbatches),
                        "must be a multiple of pp (" + num(p.pp) + ") for the interleaved schedule");
  } else if (p.v != 1) {
    throw ConfigError("plan.v", num(p.v), "chunks per rank need schedule=interleaved");
  }
  if (p.zero < 0 || p.zero > 3) throw ConfigError("plan.zero", num(p.zero), "must be 0, 1, 2 or 3");
  // DeepSpeed refuses ZeRO-2/3 with pipeline parallelism: gradients are accumulated over many
  // microbatches per stage, and sharding them would reduce-scatter after every microbatch.
  if (p.zero >= 2 && p.pp > 1)
    throw ConfigError("plan.zero", num(p.zero), "stages 2 and 3 cannot be combined with pp > 1 (use zero <= 1)");
  if (p.sequence_parallel) {
    if (p.tp < 2) throw ConfigError("plan.sp", "on", "sequence parallel needs tp > 1");
    // The lab MLP's "sequence" is its batch of samples: its rows split t ways outside the TP region.
    if (model.kind != ModelKind::kTransformer && model.kind != ModelKind::kMlp)
      throw ConfigError("plan.sp", "on", "sequence parallel applies to transformer and mlp models only");
    if (model.kind == ModelKind::kTransformer && model.seq_len % p.tp != 0)
      throw ConfigError("plan.sp", "on", "tp (" + num(p.tp) + ") must divide seq_len (" + num(model.seq_len) + ")");
  }
  if (!(p.bucket_bytes > 0))
    throw ConfigError("plan.bucket_mb", std::to_string(p.bucket_bytes / 1048576.0), "must be positive");
  if (p.recompute != Recompute::kNone && model.kind == ModelKind::kParams)
    throw ConfigError("plan.recompute", std::string(to_string(p.recompute)), "needs a model shape");
}

StateBytes state_bytes_per_param(Precision precision, OptimizerKind optimizer) {
  const bool adam = optimizer == OptimizerKind::kAdam;
  if (precision == Precision::kMixed)
    return {.params = 2, .grads = 2, .optimizer = adam ? 12.0 : 8.0, .wire_grads = 2, .wire_params = 2};
  return {.params = 4, .grads = 4, .optimizer = adam ? 8.0 : 4.0, .wire_grads = 4, .wire_params = 4};
}

StateBytes state_bytes_per_param(const Plan& p) {
  StateBytes b = state_bytes_per_param(p.precision, p.optimizer);
  if (p.precision == Precision::kMixed && p.mixed_state == MixedState::kFp32Main) {
    b.grads = 4;
    b.master = 4;
    b.wire_grads = b.wire_params = 4;
  }
  return b;
}

double activation_bytes_per_element(Precision precision) { return precision == Precision::kMixed ? 2.0 : 4.0; }

double boundary_bytes_per_element(const Plan& p) {
  return p.precision == Precision::kMixed && p.mixed_state == MixedState::kFp32Main
             ? 4.0
             : activation_bytes_per_element(p.precision);
}

}  // namespace parlab::strategy
