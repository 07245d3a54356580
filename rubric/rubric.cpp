#include "rubric/rubric.h"

#include <fstream>
#include <set>
#include <sstream>

#include "rubric/checks.h"
#include "base/errors.h"
#include "strategy/toml_reader.h"

namespace parlab::rubric {
namespace {

using strategy::TableReader;

const std::set<std::string> kCategories = {"correctness", "performance"};
const std::set<std::string> kHardware = {"", "gpu"};

std::string names_of(const std::vector<ThresholdSpec>& specs) {
  std::string s;
  for (const auto& t : specs) s += (s.empty() ? "" : ", ") + t.name;
  return s.empty() ? "(none)" : s;
}

std::string check_names() {
  std::string s;
  for (const auto& c : check_kinds()) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

void read_thresholds(TableReader& r, const CheckKind& kind, Criterion& c, const std::string& source,
                     const std::string& where) {
  for (const auto& t : kind.thresholds) c.thresholds[t.name] = t.default_value;
  const toml::table* table = r.table("thresholds");
  if (!table) return;
  TableReader tr(*table, source, where + "thresholds.");
  for (const auto& t : kind.thresholds)
    if (auto v = tr.number(t.name)) c.thresholds[t.name] = *v;
  tr.reject_unknown(names_of(kind.thresholds) + " (the thresholds of check '" + kind.name + "')");
}

void read_lists(TableReader& r, const CheckKind& kind, Criterion& c) {
  for (const auto& name : kind.lists) {
    const toml::node* n = r.find(name);
    if (!n) continue;
    const toml::array* a = n->as_array();
    if (!a) r.fail(name, TableReader::describe(*n), "must be an array of strings");
    for (const auto& e : *a) {
      auto v = e.value_exact<std::string>();
      if (!v) r.fail(name, TableReader::describe(e), "must hold strings");
      c.lists[name].push_back(*v);
    }
  }
}

Criterion parse_criterion(const toml::table& t, const std::string& source, size_t index) {
  // The id is read first so that every later error names the criterion.
  std::string where = "criterion[" + std::to_string(index) + "]";
  {
    const toml::node* id = t.get("id");
    if (id && id->value_exact<std::string>()) where += " (" + *id->value_exact<std::string>() + ")";
  }
  TableReader r(t, source, where + ".");
  Criterion c;
  c.id = r.string("id").value_or("");
  if (c.id.empty()) r.fail("id", "(missing)", "every criterion needs a unique id");
  c.title = r.string("title").value_or(c.id);
  const auto points = r.number("points");
  if (!points) r.fail("points", "(missing)", "required: the points this criterion is worth");
  if (!(*points >= 0)) r.fail("points", std::to_string(*points), "must be >= 0");
  c.points = *points;
  c.category = r.string("category").value_or(c.category);
  if (!kCategories.count(c.category)) r.fail("category", c.category, "one of correctness, performance");
  const auto check = r.string("check");
  if (!check) r.fail("check", "(missing)", "one of " + check_names());
  const CheckKind* kind = find_check(*check);
  if (!kind) r.fail("check", *check, "one of " + check_names());
  c.check = *check;
  c.proof = r.string("proof").value_or(kind->proof_kind);
  // The two checks that read predictions rows, not proofs.
  if (c.proof.empty() && c.check != "predictions_before_reveal" && c.check != "lesson_progress")
    r.fail("proof", "(missing)", "check '" + c.check + "' needs the proof kind it reads");
  c.experiment = r.string("experiment").value_or("");
  c.gate = r.string("gate").value_or("");
  c.requires_hardware = r.string("requires").value_or("");
  if (!kHardware.count(c.requires_hardware)) r.fail("requires", c.requires_hardware, "\"\" or \"gpu\"");
  c.fix = r.string("fix").value_or("");
  read_thresholds(r, *kind, c, source, where + ".");
  read_lists(r, *kind, c);
  std::string allowed = "id, title, points, category, check, proof, experiment, gate, requires, fix, [thresholds]";
  for (const auto& l : kind->lists) allowed += ", " + l;
  r.reject_unknown(allowed);
  return c;
}

// Ids unique; a gate names an earlier-or-later criterion of category correctness.
void check_references(const Rubric& rubric) {
  std::set<std::string> ids;
  for (size_t i = 0; i < rubric.criteria.size(); ++i) {
    const Criterion& c = rubric.criteria[i];
    const std::string where = rubric.source + ": criterion[" + std::to_string(i) + "] (" + c.id + ")";
    if (!ids.insert(c.id).second) throw ConfigError(where + ".id", c.id, "already used by an earlier criterion");
  }
  for (size_t i = 0; i < rubric.criteria.size(); ++i) {
    const Criterion& c = rubric.criteria[i];
    if (c.gate.empty()) continue;
    const std::string where = rubric.source + ": criterion[" + std::to_string(i) + "] (" + c.id + ").gate";
    const Criterion* g = rubric.find(c.gate);
    if (!g) throw ConfigError(where, c.gate, "must name another criterion's id");
    if (g->id == c.id) throw ConfigError(where, c.gate, "a criterion cannot gate itself");
    if (g->category != "correctness") throw ConfigError(where, c.gate, "must name a correctness criterion");
  }
}

}  // namespace

double Criterion::threshold(const std::string& name) const {
  const auto it = thresholds.find(name);
  if (it == thresholds.end()) throw RuntimeError("check '" + check + "' has no threshold '" + name + "'");
  return it->second;
}

const Criterion* Rubric::find(const std::string& id) const {
  for (const Criterion& c : criteria)
    if (c.id == id) return &c;
  return nullptr;
}

double Rubric::total_points() const {
  double s = 0;
  for (const Criterion& c : criteria) s += c.points;
  return s;
}

Rubric parse_rubric(std::string_view text, const std::string& source) {
  const toml::table root = strategy::parse_toml(text, source);
  TableReader r(root, source, "");
  Rubric rubric;
  rubric.source = source;
  rubric.name = r.string("name").value_or(std::filesystem::path(source).stem().string());
  rubric.title = r.string("title").value_or(rubric.name);
  if (auto pm = r.number("pass_mark")) {
    if (!(*pm > 0 && *pm <= 1)) r.fail("pass_mark", std::to_string(*pm), "a fraction in (0, 1], e.g. 0.80");
    rubric.pass_mark = *pm;
  }
  const toml::node* list = r.find("criterion");
  if (!list) r.fail("criterion", "(missing)", "at least one [[criterion]] table");
  const toml::array* a = list->as_array();
  if (!a || a->empty()) r.fail("criterion", TableReader::describe(*list), "at least one [[criterion]] table");
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::table* t = (*a)[i].as_table();
    if (!t)
      r.fail("criterion[" + std::to_string(i) + "]", TableReader::describe((*a)[i]), "must be a [[criterion]] table");
    rubric.criteria.push_back(parse_criterion(*t, source, i));
  }
  r.reject_unknown("name, title, pass_mark, [[criterion]]");
  check_references(rubric);
  if (!(rubric.total_points() > 0)) r.fail("criterion", "(all 0 points)", "the criteria must be worth some points");
  return rubric;
}

Rubric load_rubric(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--rubric", path.string(), "cannot be read (no such file?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_rubric(text.str(), path.string());
}

const Rubric& default_rubric() {
  static const Rubric r = parse_rubric(default_rubric_text(), "rubric/parallelism.toml (built in)");
  return r;
}

}  // namespace parlab::rubric
