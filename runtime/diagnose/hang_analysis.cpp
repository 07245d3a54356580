#include "runtime/diagnose/hang_analysis.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "strategy/consistency.h"
#include "base/errors.h"
#include "base/text.h"
#include "base/units.h"

namespace parlab::diagnose {
namespace fs = std::filesystem;
namespace {

bool ended(comm::OpState s) { return s == comm::OpState::kCompleted; }

std::string describe(const comm::FlightRecord& r) {
  std::string s = std::string(comm::to_string(r.op)) + " #" + std::to_string(r.seq);
  if (!r.tag.empty()) s += " (" + r.tag + ")";
  return s;
}

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

using ByRank = std::map<int, std::map<uint64_t, const comm::FlightRecord*>>;

// The first call in [first, last] some rank with a dump had not completed, as a disagreement:
// the ranks still in it waited, the ranks without a dump are the missing ones.
strategy::Disagreement stuck_waiting_for(const ByRank& by_rank, uint64_t first, uint64_t last,
                                         const std::vector<int>& no_dump) {
  strategy::Disagreement d;
  for (uint64_t s = first; s <= last && !d.found; ++s) {
    for (const auto& [rank, seqs] : by_rank) {
      const auto it = seqs.find(s);
      if (it == seqs.end() || ended(it->second->state)) continue;
      if (!d.found) {
        d.found = true;
        d.index = int(s - first);
        d.reference = {std::string(comm::to_string(it->second->op)), it->second->bytes, it->second->tag};
      }
      d.agreeing.push_back(rank);
    }
  }
  d.missing = no_dump;
  return d;
}

// Pipeline sends and receives. Each direction of a neighbour pair has its own communicator
// ("p2p.A>B": A only sends on it, B only receives), numbered from 0 on both sides. A receive
// that never completed while the sender has no matching send (none at that number, or one with
// another tag: a later step's) is a broken edge of the pipeline. The earliest such wait is where
// the job went wrong (the later ones follow from it: a stage left waiting stops sending in
// turn), and its sender is the culprit.
std::optional<HangFinding> broken_pipeline_edge(const std::vector<comm::FlightRecorderDump>& dumps,
                                                const std::map<std::pair<std::string, int>, double>& dumped_at,
                                                double latest) {
  struct Side {
    int rank = -1;
    std::map<uint64_t, const comm::FlightRecord*> ops;
  };
  std::map<std::string, std::pair<Side, Side>> edges;  // group -> (sender, receiver)
  std::map<std::string, std::vector<int>> members;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      if (e.op != comm::OpKind::kSend && e.op != comm::OpKind::kRecv) continue;
      Side& side = e.op == comm::OpKind::kSend ? edges[d.identity.group].first : edges[d.identity.group].second;
      side.rank = d.identity.rank;
      side.ops[e.seq] = &e;
    }
  // What each rank is still waiting to receive, by tag: a stage blocked on the activation of
  // microbatch k ("sN/act.mbK...") cannot have sent that microbatch's gradient ("sN/grad.mbK..."),
  // so its missing gradient send is a consequence, not the cause. Start times alone cannot tell
  // the two apart: the stage that skipped its sends runs ahead and may start waiting first.
  std::map<int, std::set<std::string>> waiting_for;
  for (const auto& [group, edge] : edges)
    for (const auto& [seq, rec] : edge.second.ops)
      if (!ended(rec->state)) waiting_for[edge.second.rank].insert(rec->tag);
  auto explained = [&](int sender_rank, const std::string& tag) {
    const size_t at = tag.find("/grad.");
    if (at == std::string::npos) return false;
    const std::string activation = tag.substr(0, at) + "/act." + tag.substr(at + 6);
    const auto w = waiting_for.find(sender_rank);
    return w != waiting_for.end() && w->second.count(activation) > 0;
  };
  std::optional<HangFinding> best;
  double best_start = 0;
  bool best_explained = true;
  for (const auto& [group, edge] : edges) {
    const auto& [sender, receiver] = edge;
    for (const auto& [seq, rec] : receiver.ops) {
      if (ended(rec->state)) continue;
      const auto sent = sender.ops.find(seq);
      if (sent != sender.ops.end() && sent->second->tag == rec->tag) continue;  // delivered or in flight
      const double start = rec->start_seconds.value_or(latest);
      const bool is_explained = explained(sender.rank, rec->tag);
      // An unexplained missing send beats an explained one; among equals the earliest wait wins.
      if (best && (is_explained > best_explained || (is_explained == best_explained && start >= best_start))) break;
      // The sender: from its records, else from the group's name ("p2p.<from>><to>").
      int from = sender.rank;
      if (from < 0) {
        const size_t dot = group.find('.'), gt = group.find('>');
        if (dot != std::string::npos && gt != std::string::npos)
          from = std::atoi(group.substr(dot + 1, gt - dot - 1).c_str());
      }
      HangFinding f;
      f.group = group;
      f.seq = seq;
      f.op = "send";
      f.bytes = rec->bytes;
      f.tag = rec->tag;
      f.waited = {receiver.rank};
      const auto snap = dumped_at.find({group, receiver.rank});
      const double until = snap != dumped_at.end() ? std::max(snap->second, latest) : latest;
      f.waited_seconds = rec->end_seconds.value_or(until) - start;
      Culprit c;
      c.rank = from;
      c.never_reached = sent == sender.ops.end();
      c.left_no_dump = sender.rank < 0;
      if (sent != sender.ops.end()) {
        c.instead = "it sent " + describe(*sent->second) + " there instead";
      } else if (!sender.ops.empty()) {
        c.instead = "its last was " + describe(*sender.ops.rbegin()->second);
      }
      f.culprits.push_back(c);
      f.sentence = "rank " + std::to_string(from) + (c.left_no_dump ? " left no dump and never sent" : " never sent") +
                   " send #" + std::to_string(seq) + " (" + f.tag + ", " + units::format_bytes(f.bytes) + ", group " +
                   group + ") to rank " + std::to_string(receiver.rank) + (c.instead.empty() ? "" : ": " + c.instead) +
                   "; rank " + std::to_string(receiver.rank) + " waited " + seconds(f.waited_seconds);
      best = std::move(f);
      best_start = start;
      best_explained = is_explained;
      break;
    }
  }
  return best;
}

}  // namespace

std::string HangAnalysis::summary() const {
  std::string out;
  for (const auto& f : findings) out += f.sentence + "\n";
  if (findings.empty()) out = "no disagreement found: every rank issued the same collectives in the same order\n";
  return out;
}

namespace {

// The dumps indexed: group -> rank -> seq -> record (point-to-point ops have their own per-peer
// numbering and are left out of the group comparison), with what is needed to time the waits.
struct DumpIndex {
  std::map<std::string, ByRank> groups;
  std::map<std::string, int> group_sizes;
  std::map<std::pair<std::string, int>, double> dumped_at;  // (group, rank) -> snapshot time
  std::set<int> ranks_seen;
  double latest = 0;  // the last time any entry mentions
};

DumpIndex index_dumps(const std::vector<comm::FlightRecorderDump>& dumps, int& world_size, HangAnalysis& out) {
  DumpIndex x;
  for (const auto& d : dumps) {
    x.ranks_seen.insert(d.identity.rank);
    if (d.dumped_seconds) x.dumped_at[{d.identity.group, d.identity.rank}] = *d.dumped_seconds;
    world_size = std::max(world_size, d.identity.world_size);
    x.group_sizes[d.identity.group] = std::max(x.group_sizes[d.identity.group], d.identity.group_size);
    auto& by_seq = x.groups[d.identity.group][d.identity.rank];
    if (d.dropped > 0)
      out.notes.push_back("rank " + std::to_string(d.identity.rank) + " group " + d.identity.group +
                          ": the ring dropped " + std::to_string(d.dropped) + " older entries");
    for (const auto& e : d.entries) {
      if (comm::is_point_to_point(e.op)) continue;
      by_seq[e.seq] = &e;
      x.latest = std::max({x.latest, e.start_seconds.value_or(0), e.end_seconds.value_or(0)});
    }
  }
  out.notes.push_back("read " + std::to_string(dumps.size()) + " dumps from " + std::to_string(x.ranks_seen.size()) +
                      " ranks");
  for (int r = 0; r < world_size; ++r)
    if (!x.ranks_seen.count(r)) out.notes.push_back("rank " + std::to_string(r) + " left no flight-recorder dump");
  return x;
}

// Where one group's ranks first disagree, from the first sequence number every rank still holds
// (`first` is set to it). Ranks of the world group that left no dump at all (known from its size)
// are not compared call by call, their history being unknown; when the ranks with dumps agree
// but some never completed an op, they waited there for a rank without a record (it froze or
// died): that op is where the job stopped.
strategy::Disagreement disagreement(const std::string& group, const ByRank& by_rank, int size, uint64_t& first,
                                    std::vector<int>& no_dump) {
  uint64_t last = 0;
  bool any = false;
  for (const auto& [rank, seqs] : by_rank) {
    if (seqs.empty()) continue;
    first = any ? std::max(first, seqs.begin()->first) : seqs.begin()->first;
    last = any ? std::max(last, seqs.rbegin()->first) : seqs.rbegin()->first;
    any = true;
  }
  if (!any) return {};
  std::map<int, std::vector<strategy::CallRecord>> calls;
  for (const auto& [rank, seqs] : by_rank) {
    auto& v = calls[rank];
    for (uint64_t s = first; s <= last; ++s) {
      auto it = seqs.find(s);
      if (it == seqs.end()) break;
      v.push_back({std::string(comm::to_string(it->second->op)), it->second->bytes, it->second->tag});
    }
  }
  if (group == "world")
    for (int r = 0; r < size; ++r)
      if (!by_rank.count(r)) no_dump.push_back(r);
  strategy::Disagreement d = strategy::first_disagreement(calls);
  if (!d.found && !no_dump.empty()) d = stuck_waiting_for(by_rank, first, last, no_dump);
  return d;
}

// The disagreement as a finding: the collective, who waited how long, and the culprits (those
// that never reached it, then those that issued something else there).
HangFinding make_finding(const std::string& group, const DumpIndex& x, const strategy::Disagreement& d, uint64_t first,
                         const std::vector<int>& no_dump) {
  const ByRank& by_rank = x.groups.at(group);
  HangFinding f;
  f.group = group;
  f.seq = first + uint64_t(d.index);
  f.op = d.reference.op;
  f.bytes = d.reference.bytes;
  f.tag = d.reference.tag;
  f.waited = d.agreeing;
  for (int r : d.agreeing) {
    const auto* rec = by_rank.at(r).at(f.seq);
    // Still waiting when the dump was taken (a rank stopped by the supervisor): it had waited
    // until the snapshot.
    const auto snap = x.dumped_at.find({group, r});
    const double until = snap != x.dumped_at.end() ? std::max(snap->second, x.latest) : x.latest;
    const double start = rec->start_seconds.value_or(until);
    const double end = rec->end_seconds && ended(rec->state) ? *rec->end_seconds : rec->end_seconds.value_or(until);
    f.waited_seconds = std::max(f.waited_seconds, end - start);
  }
  for (int r : d.missing) {
    Culprit c;
    c.rank = r;
    c.never_reached = true;
    c.left_no_dump = std::find(no_dump.begin(), no_dump.end(), r) != no_dump.end();
    if (!c.left_no_dump && !by_rank.at(r).empty())
      c.instead = "its last was " + describe(*by_rank.at(r).rbegin()->second);
    f.culprits.push_back(c);
  }
  for (int r : d.different) {
    Culprit c;
    c.rank = r;
    c.instead = "it issued " + describe(*by_rank.at(r).at(f.seq)) + " there instead";
    f.culprits.push_back(c);
  }
  return f;
}

// "rank 2 skipped all-reduce #10 (tag, 12.6 MB, group world): it issued ... instead; ranks 0, 1,
// 3 waited 30.0 s". A rank that issued another op there skipped this one; a rank whose record
// ends before it never reached it.
std::string sentence(const HangFinding& f) {
  std::string who;
  for (const auto& c : f.culprits) {
    if (!who.empty()) who += "; ";
    const char* what = c.left_no_dump    ? " left no dump and never reached"
                       : c.never_reached ? " never reached"
                                         : " skipped";
    who += "rank " + std::to_string(c.rank) + what + " " + f.op + " #" + std::to_string(f.seq) + " (" + f.tag + ", " +
           units::format_bytes(f.bytes) + ", group " + f.group + ")";
    if (!c.instead.empty()) who += ": " + c.instead;
  }
  return who + "; " + (f.waited.size() == 1 ? "rank " : "ranks ") + strategy::join_ranks(f.waited) + " waited " +
         seconds(f.waited_seconds);
}

}  // namespace

HangAnalysis analyze_dumps(const std::vector<comm::FlightRecorderDump>& dumps, int world_size) {
  HangAnalysis out;
  const DumpIndex x = index_dumps(dumps, world_size, out);
  for (const auto& [group, by_rank] : x.groups) {
    uint64_t first = 0;
    std::vector<int> no_dump;
    const strategy::Disagreement d = disagreement(group, by_rank, x.group_sizes.at(group), first, no_dump);
    if (!d.found) continue;
    HangFinding f = make_finding(group, x, d, first, no_dump);
    f.sentence = sentence(f);
    out.findings.push_back(std::move(f));
  }
  // The world group's disagreement usually explains the others; order by the wait (longest first).
  std::stable_sort(out.findings.begin(), out.findings.end(),
                   [](const HangFinding& a, const HangFinding& b) { return a.waited_seconds > b.waited_seconds; });
  // A pipeline edge that broke explains the collectives its stages then missed: it goes first.
  if (auto edge = broken_pipeline_edge(dumps, x.dumped_at, x.latest))
    out.findings.insert(out.findings.begin(), std::move(*edge));
  out.found = !out.findings.empty();
  return out;
}

namespace {
// Dumps directly in `dir` and in `dir`/flight, sorted.
std::vector<fs::path> dump_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::path& d : {dir, dir / "flight"}) {
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.rfind("flight_recorder.", 0) == 0 && name.ends_with(".json"))
        files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace

namespace {

// One dump file, or a ConfigError naming it. The parser's message is cut to printable ASCII: it
// quotes the bytes it last read, and a damaged file holds any bytes.
comm::FlightRecorderDump load_dump(const fs::path& file, const std::string* text = nullptr) {
  try {
    return text ? comm::FlightRecorder::from_json(*text) : comm::FlightRecorder::load(file);
  } catch (const Error& e) {
    throw ConfigError("dump", file.string(),
                      "is not a readable flight-recorder dump (" + parlab::printable(e.what()) + ")");
  }
}

}  // namespace

HangAnalysis analyze_run_dir(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw ConfigError("RUN_DIR", dir.string(), "is not a directory");
  std::vector<fs::path> files = dump_files(dir);
  std::string from;
  if (files.empty()) {
    // A restarted job moved each failed attempt's dumps to attempt-<k>/: the latest one that
    // has any is the last hang. Attempts are never mixed (their sequence numbers restart).
    int latest = -1;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory() || name.rfind("attempt-", 0) != 0) continue;
      const int k = std::atoi(name.c_str() + 8);
      if (k > latest && !dump_files(e.path()).empty()) latest = k;
    }
    if (latest >= 0) {
      from = "attempt-" + std::to_string(latest);
      files = dump_files(dir / from);
    }
  }
  std::vector<comm::FlightRecorderDump> dumps;
  for (const auto& f : files) dumps.push_back(load_dump(f));
  if (dumps.empty()) {
    // A simulator result saved in the directory works too.
    for (const char* name : {"sim.json", "simulate.json"})
      if (fs::exists(dir / name)) return analyze_path(dir / name);
    throw ConfigError("RUN_DIR", dir.string(), "holds no flight_recorder.*.json dumps (did any rank time out?)");
  }
  HangAnalysis a = analyze_dumps(dumps);
  if (!from.empty()) a.notes.push_back("the dumps of " + from + " (the latest attempt that left any)");
  return a;
}

HangAnalysis analyze_sim_result(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("simulator result", "(JSON)", e.what());
  }
  if (!j.contains("hang"))
    throw ConfigError("simulator result", "(no \"hang\")", "run parlab simulate --json with a stop fault");
  const auto& h = j["hang"];
  HangAnalysis out;
  out.notes.push_back("simulated run");
  if (!h.value("deadlock", false)) return out;
  // Group the waiters by the collective they wait in.
  std::map<std::pair<std::string, int>, HangFinding> by_call;
  for (const auto& w : h["waiting"]) {
    if (w.value("group", "").empty()) continue;
    auto& f = by_call[{w["group"].get<std::string>(), w.value("call", -1)}];
    f.group = w["group"];
    f.seq = uint64_t(std::max(0, w.value("call", 0)));
    f.op = w.value("op", "");
    f.tag = w.value("tag", "");
    f.waited.push_back(w.value("rank", 0));
    for (int m : w.value("waiting_for", std::vector<int>{}))
      if (std::none_of(f.culprits.begin(), f.culprits.end(), [&](const Culprit& c) { return c.rank == m; }))
        f.culprits.push_back({m, true, "", false});
    f.waited_seconds = std::max(f.waited_seconds, h.value("at_seconds", 0.0) - w.value("since_seconds", 0.0));
  }
  const auto stopped = h.value("stopped_ranks", std::vector<int>{});
  for (auto& [key, f] : by_call) {
    std::sort(f.waited.begin(), f.waited.end());
    std::string who;
    for (auto& c : f.culprits) {
      if (std::find(stopped.begin(), stopped.end(), c.rank) != stopped.end()) c.instead = "it stopped (injected fault)";
      who += (who.empty() ? "" : "; ") + std::string("rank ") + std::to_string(c.rank) + " never reached " + f.op +
             " call #" + std::to_string(f.seq) + " (" + f.tag + ", group " + f.group + ")" +
             (c.instead.empty() ? "" : ": " + c.instead);
    }
    f.sentence =
        who + "; ranks " + strategy::join_ranks(f.waited) + " waited " + seconds(f.waited_seconds) + " (simulated)";
    out.findings.push_back(f);
  }
  out.found = !out.findings.empty();
  return out;
}

HangAnalysis analyze_path(const fs::path& path) {
  if (fs::is_directory(path)) return analyze_run_dir(path);
  std::ifstream in(path);
  if (!in) throw ConfigError("RUN_DIR", path.string(), "no such file or directory");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  if (s.find("\"hang\"") != std::string::npos) return analyze_sim_result(s);
  return analyze_dumps({load_dump(path, &s)});
}

}  // namespace parlab::diagnose
