#pragma once
// Cross-rank consistency of step programs: every collective appears on every member of its
// group, in the same order, with the same bytes; every send has a matching receive. A program
// set that breaks this hangs at run time — exactly the failure this lab teaches ("one rank skips
// a batch and misses an all-reduce, leaving every other rank hung") — so the checker is also the
// first tool that names such a rank.
#include <map>
#include <string>
#include <vector>

#include "strategy/step_program.h"

namespace parlab::strategy {

// One collective call as a rank issued it, in issue order within its group.
struct CallRecord {
  std::string op;  // "all-reduce", ...
  double bytes = 0;
  std::string tag;
  double min_chunk_bytes = -1;  // Op::min_chunk_bytes (programs only): every member cuts the same chunks
};

// The first position where members of one group disagree, if any.
struct Disagreement {
  bool found = false;
  int index = 0;               // 0-based call number within the group
  std::vector<int> agreeing;   // ranks whose call #index matches the reference
  std::vector<int> missing;    // ranks with fewer than index + 1 calls
  std::vector<int> different;  // ranks whose call #index differs (op, bytes or tag)
  CallRecord reference;        // the call most members made
};

// Compares per-rank call sequences of one group. The reference call at each position is the
// one the largest number of ranks made (ties: the lowest rank's).
Disagreement first_disagreement(const std::map<int, std::vector<CallRecord>>& calls_by_rank);

// Checks the programs of a whole world (programs[r].rank == r). Returns one readable line per
// problem, e.g. "group dp.0: call #3 all-reduce grad.bucket3 (12.6 MB): rank 2 never issues it
// (it stops after #2); ranks 0, 1, 3 do". Empty when consistent.
std::vector<std::string> check_consistency(const std::vector<StepProgram>& programs);

// "0, 1, 3"
std::string join_ranks(const std::vector<int>& ranks);

}  // namespace parlab::strategy
