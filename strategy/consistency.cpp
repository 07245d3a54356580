#include "strategy/consistency.h"

#include <algorithm>
#include <set>

#include "base/units.h"

namespace parlab::strategy {
namespace {

bool same(const CallRecord& a, const CallRecord& b) {
  return a.op == b.op && a.bytes == b.bytes && a.tag == b.tag && a.min_chunk_bytes == b.min_chunk_bytes;
}

std::string describe_call(const CallRecord& c) {
  return c.op + " " + c.tag + " (" + units::format_bytes(c.bytes) + ")";
}

}  // namespace

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

Disagreement first_disagreement(const std::map<int, std::vector<CallRecord>>& calls) {
  Disagreement d;
  size_t longest = 0;
  for (const auto& [rank, seq] : calls) longest = std::max(longest, seq.size());
  for (size_t i = 0; i < longest; ++i) {
    // The reference is the call most ranks made at position i.
    const CallRecord* ref = nullptr;
    int best = 0;
    for (const auto& [rank, seq] : calls) {
      if (i >= seq.size()) continue;
      int votes = 0;
      for (const auto& [r2, s2] : calls) votes += i < s2.size() && same(s2[i], seq[i]);
      if (votes > best) best = votes, ref = &seq[i];
    }
    Disagreement here;
    here.index = int(i);
    here.reference = *ref;
    for (const auto& [rank, seq] : calls) {
      if (i >= seq.size())
        here.missing.push_back(rank);
      else if (same(seq[i], *ref))
        here.agreeing.push_back(rank);
      else
        here.different.push_back(rank);
    }
    if (!here.missing.empty() || !here.different.empty()) {
      here.found = true;
      return here;
    }
  }
  return d;
}

std::vector<std::string> check_consistency(const std::vector<StepProgram>& programs) {
  std::vector<std::string> problems;
  // Collectives, group by group.
  std::map<std::string, std::vector<int>> members;
  std::map<std::string, std::map<int, std::vector<CallRecord>>> calls;
  for (const auto& prog : programs) {
    for (const auto& g : prog.groups) {
      auto [it, inserted] = members.emplace(g.name, g.ranks);
      if (!inserted && it->second != g.ranks)
        problems.push_back("group " + g.name + ": rank " + std::to_string(prog.rank) + " has members {" +
                           join_ranks(g.ranks) + "} but others have {" + join_ranks(it->second) + "}");
      if (std::find(g.ranks.begin(), g.ranks.end(), prog.rank) == g.ranks.end())
        problems.push_back("group " + g.name + ": rank " + std::to_string(prog.rank) + " is not a member of it");
      calls[g.name][prog.rank];  // a member with no calls still counts
    }
    for (const auto& op : prog.ops) {
      if (!op.is_collective()) continue;
      auto& seq = calls[prog.group_of(op).name][prog.rank];
      for (int k = 0; k < op.calls(); ++k)
        seq.push_back({std::string(to_string(op.call_kind(k))), op.bytes, op.tag, op.min_chunk_bytes});
    }
  }
  for (const auto& [name, ranks] : members) {
    auto& by_rank = calls[name];
    for (int r : ranks) by_rank[r];  // members whose program is absent appear with no calls
    const Disagreement d = first_disagreement(by_rank);
    if (!d.found) continue;
    std::string msg = "group " + name + ": call #" + std::to_string(d.index) + " " + describe_call(d.reference) + ":";
    for (int r : d.missing)
      msg += " rank " + std::to_string(r) + " never issues it (it stops after " +
             (d.index == 0 ? std::string("no calls") : "#" + std::to_string(d.index - 1)) + ");";
    for (int r : d.different)
      msg += " rank " + std::to_string(r) + " issues " + describe_call(by_rank.at(r)[d.index]) + " instead;";
    msg += " ranks " + join_ranks(d.agreeing) + " do";
    problems.push_back(msg);
  }
  // Point-to-point: the k-th send a -> b matches the k-th receive at b from a.
  std::map<std::pair<int, int>, std::vector<CallRecord>> sends, recvs;
  for (const auto& prog : programs)
    for (const auto& op : prog.ops) {
      if (op.kind == OpKind::kSend) sends[{prog.rank, op.peer}].push_back({"send", op.bytes, op.tag});
      if (op.kind == OpKind::kRecv) recvs[{op.peer, prog.rank}].push_back({"recv", op.bytes, op.tag});
    }
  std::set<std::pair<int, int>> pairs;
  for (const auto& [k, v] : sends) pairs.insert(k);
  for (const auto& [k, v] : recvs) pairs.insert(k);
  for (const auto& key : pairs) {
    const auto& s = sends[key];
    const auto& r = recvs[key];
    const std::string who = std::to_string(key.first) + " -> " + std::to_string(key.second);
    for (size_t i = 0; i < std::max(s.size(), r.size()); ++i) {
      if (i >= s.size()) {
        problems.push_back(who + ": receive #" + std::to_string(i) + " " + r[i].tag + " has no matching send");
        break;
      }
      if (i >= r.size()) {
        problems.push_back(who + ": send #" + std::to_string(i) + " " + s[i].tag + " is never received");
        break;
      }
      if (s[i].bytes != r[i].bytes || s[i].tag != r[i].tag) {
        problems.push_back(who + ": send #" + std::to_string(i) + " " + s[i].tag + " (" +
                           units::format_bytes(s[i].bytes) + ") meets receive " + r[i].tag + " (" +
                           units::format_bytes(r[i].bytes) + ")");
        break;
      }
    }
  }
  return problems;
}

}  // namespace parlab::strategy
