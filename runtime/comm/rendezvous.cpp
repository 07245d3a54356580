#include "runtime/comm/rendezvous.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>

#include "base/units.h"

namespace parlab::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string list_keys(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (const auto& k : keys) s += (s.size() > 1 ? ", " : "") + k;
  return s + "]";
}

// Polls `store.check` until every key exists or `timeout` passes (0: forever, Gloo's
// convention), then names the missing keys.
void poll_wait(Store& store, const std::string& what, const std::vector<std::string>& keys,
               std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (timeout.count() > 0 && Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        if (!store.check({k})) missing.push_back(k);
      }
      throw StoreTimeout(what + ": keys " + list_keys(missing) + " still missing after " +
                         units::format_seconds(std::chrono::duration<double>(timeout).count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

// Gloo's FileStore with its existence check made public. Its own wait() rounds elapsed time
// down to whole seconds, so waits go through poll_wait instead.
class CheckableFileStore : public gloo::rendezvous::FileStore {
 public:
  using FileStore::check;
  using FileStore::FileStore;
  using FileStore::objectPath;
};

class FileStore final : public Store {
 public:
  explicit FileStore(const std::filesystem::path& dir) : dir_(dir.string()), impl_(make(dir)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard lock(mu_);
    try {
      impl_.set(key, data);
    } catch (const std::exception& e) {
      throw StoreError("file store " + dir_ + ": cannot set " + key + ": " + e.what());
    }
    // Values carry addresses and pointer-like bytes: owner only (the directory already is).
    std::error_code ec;
    std::filesystem::permissions(impl_.objectPath(key),
                                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, kDefaultTimeout);
    std::lock_guard lock(mu_);
    try {
      return impl_.get(key);
    } catch (const std::exception& e) {
      throw StoreError("file store " + dir_ + ": cannot get " + key + ": " + e.what());
    }
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mu_);
    try {
      return impl_.check(keys);
    } catch (const std::exception& e) {
      throw StoreError("file store " + dir_ + ": " + e.what());
    }
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    poll_wait(*this, "file store " + dir_, keys, timeout);
  }

 private:
  static std::string make(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw StoreError("file store: cannot create " + dir.string() + ": " + ec.message());
    // Owner only, so no other user can read a rendezvous value or plant a key for the job.
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    if (ec) throw StoreError("file store: cannot make " + dir.string() + " private: " + ec.message());
    return dir.string();
  }
  std::string dir_;
  // Gloo's FileStore appends to an unguarded vector in set(): one process may share this store
  // between threads (ranks as threads, concurrent splits), so calls are serialised here.
  std::mutex mu_;
  CheckableFileStore impl_;
};

// Gloo's HashStore with a non-blocking existence check and a wait that names missing keys.
class CheckableHashStore : public gloo::rendezvous::HashStore {
 public:
  bool has(const std::vector<std::string>& keys) {
    std::lock_guard lock(m_);
    for (const auto& k : keys) {
      if (map_.find(k) == map_.end()) return false;
    }
    return true;
  }
  // Wakes on every set() (HashStore notifies cv_); false on timeout.
  bool wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_);
    auto ready = [&] {
      for (const auto& k : keys) {
        if (map_.find(k) == map_.end()) return false;
      }
      return true;
    };
    if (timeout.count() <= 0) {
      cv_.wait(lock, ready);
      return true;
    }
    return cv_.wait_for(lock, timeout, ready);
  }
};

class InProcessStore final : public Store {
 public:
  void set(const std::string& key, const std::vector<char>& data) override {
    try {
      impl_.set(key, data);
    } catch (const std::exception& e) {
      throw StoreError("in-process store: cannot set " + key + ": " + e.what());
    }
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, kDefaultTimeout);
    return impl_.get(key);
  }
  bool check(const std::vector<std::string>& keys) override { return impl_.has(keys); }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    if (impl_.wait_for(keys, timeout)) return;
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (!impl_.has({k})) missing.push_back(k);
    }
    throw StoreTimeout("in-process store: keys " + list_keys(missing) + " still missing after " +
                       units::format_seconds(std::chrono::duration<double>(timeout).count()));
  }

 private:
  CheckableHashStore impl_;
};

class PrefixedStore final : public Store {
 public:
  PrefixedStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/") {}

  void set(const std::string& key, const std::vector<char>& data) override { base_->set(prefix_ + key, data); }
  std::vector<char> get(const std::string& key) override { return base_->get(prefix_ + key); }
  bool check(const std::vector<std::string>& keys) override { return base_->check(join(keys)); }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    base_->wait(join(keys), timeout);
  }

 private:
  std::vector<std::string> join(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// ---- environment ----

using Lookup = std::function<std::optional<std::string>(const std::string&)>;

std::optional<long> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < INT_MIN || v > INT_MAX) return std::nullopt;
  return v;
}

// Reads integer variable `name` in [lo, hi]; `required` false returns `fallback` when unset.
int read_int(const Lookup& lookup, const std::string& name, long lo, long hi, const std::string& range_text,
             bool required, int fallback = 0) {
  const std::optional<std::string> text = lookup(name);
  if (!text) {
    if (!required) return fallback;
    throw ConfigError(name, "<unset>", "must be set to an integer in " + range_text);
  }
  const std::optional<long> v = parse_int(*text);
  if (!v || *v < lo || *v > hi) {
    throw ConfigError(name, "\"" + *text + "\"", "must be an integer in " + range_text);
  }
  return static_cast<int>(*v);
}

}  // namespace

std::shared_ptr<Store> make_file_store(const std::filesystem::path& dir) { return std::make_shared<FileStore>(dir); }

std::shared_ptr<Store> make_in_process_store() { return std::make_shared<InProcessStore>(); }

std::shared_ptr<Store> make_prefixed_store(std::shared_ptr<Store> store, std::string prefix) {
  return std::make_shared<PrefixedStore>(std::move(store), std::move(prefix));
}

std::string first_slurm_host(const std::string& list) {
  // The first entry, up to a comma outside brackets: "node[01-04,07],gpu5" -> "node[01-04,07]".
  std::size_t end = 0;
  for (int depth = 0; end < list.size(); ++end) {
    if (list[end] == '[') ++depth;
    if (list[end] == ']') --depth;
    if (list[end] == ',' && depth == 0) break;
  }
  const std::string entry = list.substr(0, end);
  const std::size_t open = entry.find('['), close = entry.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return entry;
  // "node[01-04,07]" -> "node" + "01" (the first item's first number, zeros kept) + suffix.
  const std::string inside = entry.substr(open + 1, close - open - 1);
  const std::string first = inside.substr(0, inside.find_first_of(",-"));
  return entry.substr(0, open) + first + entry.substr(close + 1);
}

namespace {

// Under srun without MASTER_ADDR/MASTER_PORT: the first host of the step's node list hosts the
// store, on port 15000 + the last four digits of the job id (PyTorch Lightning's SLURMEnvironment
// does the same), so every task of the step derives the same address without being told.
void derive_slurm_master(const Lookup& lookup, RendezvousEnv& env) {
  if (env.master_addr.empty()) {
    for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      const auto list = lookup(var);
      if (!list || list->empty()) continue;
      env.master_addr = first_slurm_host(*list);
      env.master_derived = std::string("MASTER_ADDR from ") + var;
      break;
    }
  }
  if (env.master_port == 0 && !env.master_addr.empty()) {
    const auto job = lookup("SLURM_JOB_ID");
    if (!job || job->empty() || job->find_first_not_of("0123456789") != std::string::npos) return;
    const std::string last4 = job->size() > 4 ? job->substr(job->size() - 4) : *job;
    env.master_port = 15000 + std::stoi(last4);
    env.master_derived += std::string(env.master_derived.empty() ? "" : ", ") + "MASTER_PORT from SLURM_JOB_ID";
  }
}

}  // namespace

RendezvousEnv from_env(const Lookup& lookup) {
  RendezvousEnv env;
  std::string rank_var, size_var, local_var;
  if (lookup("RANK")) {
    env.launcher = "torchrun";
    rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
  } else if (lookup("SLURM_PROCID")) {
    env.launcher = "slurm";
    rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS", local_var = "SLURM_LOCALID";
  } else {
    throw ConfigError("RANK", "<unset>",
                      "launch with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, "
                      "MASTER_PORT) or under srun (SLURM_PROCID, SLURM_NTASKS)");
  }
  env.world_size = read_int(lookup, size_var, 1, INT_MAX, "[1, 2^31)", true);
  env.rank = read_int(lookup, rank_var, 0, env.world_size - 1,
                      "[0, " + size_var + " = " + std::to_string(env.world_size) + ")", true);
  env.local_rank =
      read_int(lookup, local_var, 0, env.world_size - 1, "[0, " + std::to_string(env.world_size) + ")", false, 0);
  if (auto addr = lookup("MASTER_ADDR")) {
    if (addr->empty()) throw ConfigError("MASTER_ADDR", "\"\"", "a host name or IP address");
    env.master_addr = *addr;
  }
  env.master_port = read_int(lookup, "MASTER_PORT", 1, 65535, "[1, 65535]", false, 0);
  if (auto token = lookup("PARLAB_STORE_TOKEN"); token && !token->empty()) {
    env.store_token = *token;
    env.store_token_source = "PARLAB_STORE_TOKEN";
  }
  if (auto file = lookup("PARLAB_STORE_TOKEN_FILE")) {
    if (file->empty())
      throw ConfigError("PARLAB_STORE_TOKEN_FILE", "\"\"", "the path of a 0600 token file (or unset it)");
    env.store_token_file = *file;
  }
  if (env.launcher == "slurm") derive_slurm_master(lookup, env);
  if (!env.master_addr.empty() && env.master_port == 0) {
    throw ConfigError("MASTER_PORT", "<unset>", "must be set (an integer in [1, 65535]) when MASTER_ADDR is");
  }
  return env;
}

RendezvousEnv from_env() {
  return from_env([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

std::string flight_recorder_file_name(const std::string& group, int world_rank) {
  return "flight_recorder." + group + ".rank" + std::to_string(world_rank) + ".json";
}

void join_rendezvous(Store& store, int rank, int size, std::chrono::milliseconds timeout, const std::string& what) {
  const std::string mine = "joined/" + std::to_string(rank);
  auto refuse = [&](const std::string& why) {
    throw RendezvousError(what + ": rank " + std::to_string(rank) +
                              " already joined this attempt; restart with a new attempt (" + why + ")",
                          false);
  };
  if (store.check({mine})) refuse("its key is in the store");
  try {
    store.set(mine, {'1'});
  } catch (const StoreError& e) {
    refuse(e.what());
  }
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("joined/" + std::to_string(r));
  try {
    store.wait(keys, timeout);
  } catch (const StoreTimeout&) {
    std::string missing;
    int n_missing = 0;
    for (int r = 0; r < size; ++r) {
      if (!store.check({keys[static_cast<std::size_t>(r)]})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++n_missing;
      }
    }
    throw RendezvousError(
        what + " did not complete within " + units::format_seconds(std::chrono::duration<double>(timeout).count()) +
            ": " + (n_missing == 1 ? "rank " : "ranks ") + missing + " of " + std::to_string(size) + " never joined",
        true);
  }
}

}  // namespace parlab::comm
