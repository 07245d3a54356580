#include "runtime/comm/backend_choice.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "runtime/comm/shm/shm_communicator.h"

namespace parlab::comm {

CommChoice parse_comm_choice(std::string_view text, const std::string& flag) {
  if (text == "auto") return CommChoice::kAuto;
  if (text == "shm") return CommChoice::kShm;
  if (text == "gloo") return CommChoice::kGloo;
  throw ConfigError(flag, std::string(text), "one of auto, shm, gloo");
}

std::string_view to_string(CommChoice choice) {
  switch (choice) {
    case CommChoice::kAuto:
      return "auto";
    case CommChoice::kShm:
      return "shm";
    case CommChoice::kGloo:
      return "gloo";
  }
  return "?";
}

std::string detect_host_id() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  std::string shm = "-";
  if (::stat("/dev/shm", &st) == 0) shm = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  return std::string(name) + "/" + boot + "/" + shm;
}

namespace {

// Every rank's host, indexed by rank, exchanged through the group's scope of the store.
std::vector<std::string> exchange_hosts(Store& store, int rank, int size, const GlooOptions& o,
                                        const std::string& mine) {
  store.set("hosts/" + std::to_string(rank), std::vector<char>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("hosts/" + std::to_string(r));
  try {
    store.wait(keys, o.timeout);
  } catch (const StoreTimeout& e) {
    throw RendezvousError("rendezvous of group " + o.group_name + " (attempt " + std::to_string(o.attempt) +
                              "): not every rank said which host it is on: " + e.what(),
                          true);
  }
  std::vector<std::string> hosts;
  for (const std::string& k : keys) {
    const std::vector<char> v = store.get(k);
    hosts.emplace_back(v.begin(), v.end());
  }
  return hosts;
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                const GlooOptions& options, CommChoice choice,
                                                const std::string& host_id) {
  if (choice == CommChoice::kGloo) return make_gloo_communicator(std::move(store), rank, size, options);
  if (!store) throw ConfigError("store", "null", "a rendezvous store is required");
  auto scoped =
      make_prefixed_store(store, "parlab/attempt." + std::to_string(options.attempt) + "/" + options.group_name);
  const std::vector<std::string> hosts =
      exchange_hosts(*scoped, rank, size, options, host_id.empty() ? detect_host_id() : host_id);
  const std::set<std::string> distinct(hosts.begin(), hosts.end());
  if (distinct.size() == 1) return make_shm_communicator(std::move(store), rank, size, shm_options_from(options));
  if (choice == CommChoice::kShm) {
    throw ConfigError("--comm", "shm",
                      "shared memory needs every rank on one host, but the " + std::to_string(size) + " ranks are on " +
                          std::to_string(distinct.size()) +
                          " hosts; use --comm auto (Gloo "
                          "between hosts, shared memory inside each) or --comm gloo");
  }
  GlooOptions o = options;
  o.hosts = hosts;
  return make_gloo_communicator(std::move(store), rank, size, o);
}

}  // namespace parlab::comm
