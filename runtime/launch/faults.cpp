#include "runtime/launch/faults.h"

#include "base/key_values.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/errors.h"

namespace parlab::launch {
namespace {

using checkpoint::SavePhase;

constexpr SavePhase kPhases[] = {SavePhase::kMidShardWrite,       SavePhase::kAfterShardWrite,
                                 SavePhase::kBeforeManifest,      SavePhase::kBeforeRename,
                                 SavePhase::kBeforePointerUpdate, SavePhase::kAfterPointerUpdate};

struct KindInfo {
  FaultKind kind;
  const char* name;
  std::vector<std::string> required, optional;
};

const std::vector<KindInfo>& kinds() {
  static const std::vector<KindInfo> k = {
      {FaultKind::kKill, "kill", {"rank", "step"}, {}},
      {FaultKind::kKillDuringCheckpoint, "kill-during-checkpoint", {"step", "phase"}, {"rank"}},
      {FaultKind::kCorruptCheckpoint, "corrupt-checkpoint", {"step"}, {"shard"}},
      {FaultKind::kLoseRank, "lose-rank", {"rank", "step"}, {}},
      {FaultKind::kSkipAllReduce, "skip-allreduce", {"rank", "step"}, {}},
      {FaultKind::kHang, "hang", {"rank", "step"}, {}},
      {FaultKind::kSlow, "slow", {"rank", "factor"}, {"step"}},
      {FaultKind::kSkipSend, "skip-send", {"rank", "step"}, {}},
      {FaultKind::kExit, "exit", {"rank", "step"}, {"code"}},
  };
  return k;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string all_phase_names() {
  std::string s;
  for (SavePhase p : kPhases) s += (s.empty() ? "" : ", ") + std::string(checkpoint::save_phase_name(p));
  return s;
}

bool rank0_only(SavePhase p) { return p != SavePhase::kMidShardWrite && p != SavePhase::kAfterShardWrite; }

}  // namespace

const char* fault_kind_name(FaultKind kind) {
  for (const KindInfo& k : kinds())
    if (k.kind == kind) return k.name;
  return "unknown";
}

std::string FaultSpec::to_string() const {
  const std::string s = "step=" + std::to_string(step);
  const std::string r = "rank=" + std::to_string(rank);
  std::string text;
  switch (kind) {
    case FaultKind::kKill:
    case FaultKind::kLoseRank:
    case FaultKind::kSkipAllReduce:
    case FaultKind::kSkipSend:
    case FaultKind::kHang:
      text = std::string(fault_kind_name(kind)) + ":" + r + "," + s;
      break;
    case FaultKind::kKillDuringCheckpoint:
      text = "kill-during-checkpoint:" + r + "," + s + ",phase=" + checkpoint::save_phase_name(phase);
      break;
    case FaultKind::kCorruptCheckpoint:
      text = "corrupt-checkpoint:" + s + (shard != 0 ? ",shard=" + std::to_string(shard) : "");
      break;
    case FaultKind::kExit:
      text = "exit:" + r + "," + s + (code != 3 ? ",code=" + std::to_string(code) : "");
      break;
    case FaultKind::kSlow: {
      char f[32];
      std::snprintf(f, sizeof f, "%g", factor);
      text = "slow:" + r + ",factor=" + f + (step != 0 ? "," + s : "");
      break;
    }
  }
  if (attempts != 1) text += ",attempts=" + std::to_string(attempts);
  return text;
}

FaultSpec parse_fault(std::string_view text) {
  const std::string whole(text);
  auto fail = [&](const std::string& why) -> ConfigError { return ConfigError("--fault", whole, why); };
  std::string all_kinds;
  for (const KindInfo& k : kinds()) all_kinds += (all_kinds.empty() ? "" : ", ") + std::string(k.name);

  const size_t colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  const KindInfo* info = nullptr;
  for (const KindInfo& k : kinds())
    if (kind_text == k.name) info = &k;
  if (!info)
    throw fail("unknown fault '" + std::string(kind_text) + "' (one of " + all_kinds + ", as KIND:key=value,...)");
  std::vector<std::string> optional = info->optional;
  optional.push_back("attempts");
  const std::string takes =
      std::string(info->name) + " takes " + join(info->required) + " and optionally " + join(optional);

  std::map<std::string, std::string> values;
  const std::string_view rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  for (const parlab::KeyValue& item : parlab::split_key_values(rest)) {
    if (!item.has_equals) throw fail("'" + item.item + "' is not key=value (" + takes + ")");
    const std::string& key = item.key;
    const bool known = std::count(info->required.begin(), info->required.end(), key) > 0 ||
                       std::count(optional.begin(), optional.end(), key) > 0;
    if (!known) throw fail("unknown key '" + key + "' (" + takes + ")");
    if (!values.emplace(key, item.value).second) throw fail("key '" + key + "' given twice");
  }
  for (const std::string& k : info->required)
    if (!values.count(k)) throw fail("missing key '" + k + "' (" + takes + ")");

  auto integer = [&](const std::string& key, int64_t min) -> int64_t {
    const std::string& v = values.at(key);
    int64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || end != v.data() + v.size() || x < min)
      throw fail("key '" + key + "' = '" + v + "' must be an integer >= " + std::to_string(min));
    return x;
  };
  FaultSpec f;
  f.kind = info->kind;
  if (values.count("step")) f.step = integer("step", 0);
  if (values.count("attempts")) f.attempts = static_cast<int>(integer("attempts", 0));
  if (values.count("factor")) {
    const std::string& v = values.at("factor");
    double x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x) || !(x > 1))
      throw fail("key 'factor' = '" + v + "' must be a number > 1 (how many times longer the rank computes)");
    f.factor = x;
  }
  if (values.count("rank")) f.rank = static_cast<int>(integer("rank", 0));
  if (values.count("shard")) f.shard = static_cast<int>(integer("shard", 0));
  if (values.count("code")) {
    // 126 and up mean "not executable", "not found" and "killed by signal N" to a shell.
    f.code = static_cast<int>(integer("code", 1));
    if (f.code > 125) throw fail("key 'code' = '" + values.at("code") + "' must be an exit code in 1..125");
  }
  if (values.count("phase")) {
    bool found = false;
    for (SavePhase p : kPhases)
      if (values.at("phase") == checkpoint::save_phase_name(p)) {
        f.phase = p;
        found = true;
      }
    if (!found) throw fail("key 'phase' = '" + values.at("phase") + "' must be one of " + all_phase_names());
    if (rank0_only(f.phase) && f.rank != 0)
      throw fail("phase " + values.at("phase") +
                 " runs on rank 0 only (the committing rank); use rank=0, or "
                 "mid-shard-write / after-shard-write for another rank");
  }
  return f;
}

std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts) {
  std::vector<FaultSpec> out;
  for (const std::string& t : texts) out.push_back(parse_fault(t));
  return out;
}

std::vector<FaultSpec> faults_for_attempt(const std::vector<std::string>& texts, int attempt) {
  std::vector<FaultSpec> out;
  for (const FaultSpec& f : parse_faults(texts))
    if (f.fires_on(attempt)) out.push_back(f);
  return out;
}

std::vector<std::string> renumber_faults(const std::vector<std::string>& texts, const std::vector<int>& devices) {
  std::vector<std::string> out;
  for (const std::string& t : texts) {
    FaultSpec f = parse_fault(t);
    if (f.has_rank()) {
      const auto it = std::find(devices.begin(), devices.end(), f.rank);
      if (it == devices.end()) continue;  // its device is no longer part of the job
      f.rank = static_cast<int>(it - devices.begin());
    }
    out.push_back(f.to_string());
  }
  return out;
}

bool is_checkpoint_step(int64_t step, int64_t every, int64_t last_step) {
  if (every <= 0 || step <= 0) return false;
  return step % every == 0 || step == last_step;
}

void check_faults(const std::vector<FaultSpec>& faults, int nproc, int64_t steps, int64_t checkpoint_every) {
  for (const FaultSpec& f : faults) {
    const std::string text = f.to_string();
    if (f.kind != FaultKind::kCorruptCheckpoint && f.rank >= nproc)
      throw ConfigError("--fault", text,
                        "rank " + std::to_string(f.rank) + " does not exist with --nproc " + std::to_string(nproc));
    if (f.kind == FaultKind::kCorruptCheckpoint && f.shard >= nproc)
      throw ConfigError("--fault", text,
                        "shard " + std::to_string(f.shard) + " does not exist with --nproc " + std::to_string(nproc));
    if (f.step > steps || (!f.needs_checkpoint() && f.step >= steps))
      throw ConfigError("--fault", text,
                        "step " + std::to_string(f.step) + " is never reached (--steps " + std::to_string(steps) + ")");
    if (f.needs_checkpoint() && !is_checkpoint_step(f.step, checkpoint_every, steps))
      throw ConfigError("--fault", text,
                        "no checkpoint is written at step " + std::to_string(f.step) +
                            (checkpoint_every > 0 ? " (--checkpoint-every " + std::to_string(checkpoint_every) +
                                                        ": multiples of it and the last step)"
                                                  : " (checkpointing is off: --checkpoint-every 0)"));
  }
}

}  // namespace parlab::launch
