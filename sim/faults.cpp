#include "sim/faults.h"

#include "base/key_values.h"

#include <fmt/core.h>

#include <cmath>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "base/errors.h"

namespace parlab::sim {
namespace {

constexpr const char* kKinds = "slow, degrade-link, stop";

FaultKind parse_kind(const std::string& field, const std::string& text) {
  if (text == "slow") return FaultKind::kSlow;
  if (text == "degrade-link" || text == "degrade_link") return FaultKind::kDegradeLink;
  if (text == "stop") return FaultKind::kStop;
  throw ConfigError(field, text, std::string("unknown fault; allowed: ") + kKinds);
}

LinkSide parse_link(const std::string& field, const std::string& text) {
  if (text == "intra") return LinkSide::kIntra;
  if (text == "nic" || text == "inter") return LinkSide::kNic;
  if (text == "all") return LinkSide::kAll;
  throw ConfigError(field, text, "must be intra, nic or all");
}

int parse_int(const std::string& field, const std::string& text, int min) {
  int v = 0;
  size_t used = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw ConfigError(field, text, "must be an integer");
  if (v < min) throw ConfigError(field, text, "must be >= " + std::to_string(min));
  return v;
}

double parse_factor(const std::string& field, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || !(v > 0))
    throw ConfigError(field, text, "must be a positive number");
  return v;
}

// Applies key=value pairs to a fault of a known kind and checks that the required keys came.
Fault build(FaultKind kind, const std::map<std::string, std::string>& kv, const std::string& where) {
  Fault f;
  f.kind = kind;
  std::string allowed = kind == FaultKind::kSlow          ? "rank, factor"
                        : kind == FaultKind::kDegradeLink ? "rank, factor, link"
                                                          : "rank, step, op";
  for (const auto& [k, v] : kv) {
    const std::string field = where + "." + k;
    if (k == "rank")
      f.rank = parse_int(field, v, 0);
    else if (k == "factor" && kind != FaultKind::kStop)
      f.factor = parse_factor(field, v);
    else if (k == "link" && kind == FaultKind::kDegradeLink)
      f.link = parse_link(field, v);
    else if (k == "step" && kind == FaultKind::kStop)
      f.step = parse_int(field, v, 0);
    else if (k == "op" && kind == FaultKind::kStop)
      f.op = parse_int(field, v, 0);
    else
      throw ConfigError(field, v, "unknown key for " + std::string(to_string(kind)) + "; allowed: " + allowed);
  }
  if (!kv.count("rank")) throw ConfigError(where + ".rank", "(missing)", "every fault names a rank");
  if (kind != FaultKind::kStop && !kv.count("factor"))
    throw ConfigError(where + ".factor", "(missing)", std::string(to_string(kind)) + " needs a factor");
  if (kind == FaultKind::kStop && !kv.count("step"))
    throw ConfigError(where + ".step", "(missing)", "stop needs the step at which the rank stops");
  return f;
}

std::string number(double v) { return fmt::format("{:g}", v); }

}  // namespace

std::string_view to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::kSlow:
      return "slow";
    case FaultKind::kDegradeLink:
      return "degrade-link";
    case FaultKind::kStop:
      return "stop";
  }
  return "?";
}

Fault parse_fault(std::string_view spec) {
  const std::string text = parlab::trim(spec);
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    throw ConfigError("--fault", text, std::string("expected kind:key=value,... with kind one of ") + kKinds);
  const FaultKind kind = parse_kind("--fault", parlab::trim(std::string_view(text).substr(0, colon)));
  std::map<std::string, std::string> kv;
  for (const parlab::KeyValue& item : parlab::split_key_values(std::string_view(text).substr(colon + 1))) {
    if (!item.has_equals) throw ConfigError("--fault " + std::string(to_string(kind)), item.item, "expected key=value");
    kv[item.key] = item.value;
  }
  return build(kind, kv, "--fault " + std::string(to_string(kind)));
}

std::vector<Fault> parse_faults_toml(std::string_view text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(source + ":" + std::to_string(e.source().begin.line), "(TOML)", std::string(e.description()));
  }
  std::vector<Fault> out;
  const toml::node* node = root.get("fault");
  if (!node) return out;
  const toml::array* arr = node->as_array();
  if (!arr) throw ConfigError(source + ": fault", "(not an array)", "write faults as [[fault]] tables");
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string where = source + ": fault[" + std::to_string(i) + "]";
    const toml::table* t = (*arr)[i].as_table();
    if (!t) throw ConfigError(where, "(not a table)", "write faults as [[fault]] tables");
    std::map<std::string, std::string> kv;
    std::string kind;
    for (const auto& [k, v] : *t) {
      std::ostringstream o;
      if (auto s = v.value_exact<std::string>())
        o << *s;
      else if (auto n = v.value_exact<int64_t>())
        o << *n;
      else if (auto d = v.value_exact<double>())
        o << fmt::format("{}", *d);
      else
        throw ConfigError(where + "." + std::string(k.str()), "(table or array)", "must be a string or a number");
      if (k.str() == "kind")
        kind = o.str();
      else
        kv[std::string(k.str())] = o.str();
    }
    if (kind.empty()) throw ConfigError(where + ".kind", "(missing)", std::string("one of ") + kKinds);
    out.push_back(build(parse_kind(where + ".kind", kind), kv, where));
  }
  return out;
}

std::string to_string(const Fault& f) {
  std::string s = std::string(to_string(f.kind)) + ":rank=" + std::to_string(f.rank);
  switch (f.kind) {
    case FaultKind::kSlow:
      return s + ",factor=" + number(f.factor);
    case FaultKind::kDegradeLink:
      return s + ",factor=" + number(f.factor) +
             (f.link == LinkSide::kIntra ? ",link=intra"
              : f.link == LinkSide::kNic ? ",link=nic"
                                         : "");
    case FaultKind::kStop:
      return s + ",step=" + std::to_string(f.step) + (f.op > 0 ? ",op=" + std::to_string(f.op) : "");
  }
  return s;
}

void validate(const std::vector<Fault>& faults, int world) {
  for (const auto& f : faults)
    if (f.rank < 0 || f.rank >= world)
      throw ConfigError("fault " + to_string(f), std::to_string(f.rank),
                        "rank must be in [0, " + std::to_string(world) + ")");
}

double compute_slowdown(const std::vector<Fault>& faults, int rank) {
  double s = 1;
  for (const auto& f : faults)
    if (f.kind == FaultKind::kSlow && f.rank == rank) s *= f.factor;
  return s;
}

double link_slowdown(const std::vector<Fault>& faults, int rank, LinkSide side) {
  double s = 1;
  for (const auto& f : faults)
    if (f.kind == FaultKind::kDegradeLink && f.rank == rank && (f.link == LinkSide::kAll || f.link == side))
      s *= f.factor;
  return s;
}

std::optional<Fault> stop_of(const std::vector<Fault>& faults, int rank) {
  std::optional<Fault> best;
  for (const auto& f : faults)
    if (f.kind == FaultKind::kStop && f.rank == rank &&
        (!best || f.step < best->step || (f.step == best->step && f.op < best->op)))
      best = f;
  return best;
}

}  // namespace parlab::sim
