#pragma once
// Faults the simulator injects: the stragglers, sick links and dead ranks a real cluster has.
//
//   slow:rank=R,factor=F               every compute op of rank R takes F times longer
//   degrade-link:rank=R,factor=F[,link=intra|nic|all]
//                                      the bandwidth of rank R's links is divided by F: its own
//                                      link into the node switch (intra), the NIC it uses (nic;
//                                      shared with the devices mapped to the same NIC when a node
//                                      has fewer NICs than devices), or both (all, the default)
//   stop:rank=R,step=K[,op=N]          rank R stops issuing ops at step K (0 is the first
//                                      simulated step, the warm-up), before op N of its program
//                                      (default 0: at the start of the step). The others block in
//                                      the first collective or receive that needs it; the
//                                      simulator reports who waits where and who is missing.
//
// The same faults come from an experiment file as TOML tables:
//   [[fault]]
//   kind = "slow"      # slow | degrade-link | stop
//   rank = 3
//   factor = 3.0
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parlab::sim {

enum class FaultKind { kSlow, kDegradeLink, kStop };
enum class LinkSide { kIntra, kNic, kAll };

struct Fault {
  FaultKind kind = FaultKind::kSlow;
  int rank = -1;
  double factor = 1;  // slow, degrade-link: > 0 (values below 1 speed up, for what-ifs)
  LinkSide link = LinkSide::kAll;
  int step = 0;  // stop
  int op = 0;    // stop: first op (program index) the rank no longer issues
};

// Parses one "kind:key=value,..." spec. Throws ConfigError naming the key.
Fault parse_fault(std::string_view spec);
// Parses the [[fault]] tables of a TOML document; other top-level keys are ignored, so an
// experiment file can carry its faults beside its own settings. `source` names the file in errors.
std::vector<Fault> parse_faults_toml(std::string_view text, const std::string& source);
// The canonical spec ("slow:rank=3,factor=3"), parseable back.
std::string to_string(const Fault& fault);
std::string_view to_string(FaultKind kind);
// Throws ConfigError for a rank outside [0, world).
void validate(const std::vector<Fault>& faults, int world);

// What the faults do to one rank (products when several apply).
double compute_slowdown(const std::vector<Fault>& faults, int rank);
double link_slowdown(const std::vector<Fault>& faults, int rank, LinkSide side);
// The earliest stop of `rank`, if any.
std::optional<Fault> stop_of(const std::vector<Fault>& faults, int rank);

}  // namespace parlab::sim
