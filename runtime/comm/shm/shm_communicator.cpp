// The shared-memory Communicator: issue-side bookkeeping (sequence numbers, the op queue, the
// flight recorder, dumps) over a shm::Group, and the rendezvous that maps one segment per group.
#include "runtime/comm/shm/shm_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/comm/op_queue.h"
#include "runtime/comm/shm/shm_group.h"
#include "runtime/comm/shm/shm_segment.h"

namespace parlab::comm {
namespace {

using Millis = std::chrono::milliseconds;

// What every communicator split off one shared-memory world shares.
struct ShmWorld {
  std::shared_ptr<Store> store;  // unscoped; each group scopes its own keys
  ShmOptions options;
  int world_rank = 0;
  int world_size = 1;
};

std::string group_scope(const ShmOptions& o, const std::string& group) {
  return "parlab/attempt." + std::to_string(o.attempt) + "/" + group;
}

std::string text_of(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }

// FNV-1a over what makes two calls the same collective: op, tag, counts, root.
class Fingerprint {
 public:
  Fingerprint& add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
    return *this;
  }
  template <typename T>
  Fingerprint& add(const T& v) {
    return add(&v, sizeof v);
  }
  Fingerprint& add(const std::string& s) { return add(s.data(), s.size()).add(s.size()); }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

// Rank 0 creates a named mapping (`create(name)`) and publishes its name in `store`, the others
// map it (`attach(name)`), and rank 0 unlinks the name once every rank did: from then on the
// memory lives only in the mappings, and a `kill -9` leaves nothing to clean up. PARLAB_SHM_KEEP_NAMES
// (tests only) keeps the name, as a rank killed before this point would, so a test can show that
// the supervisor's teardown removes it.
template <typename Mapping, typename Create, typename Attach>
Mapping map_on_every_rank(Store& store, int rank, int size, const ShmOptions& o, const std::string& what, Create create,
                          Attach attach) {
  const std::string name_key = "shm/segment";
  std::string name;
  Mapping mapping;
  try {
    if (rank == 0) {
      name = shm::new_segment_name();
      mapping = create(name);
      store.set(name_key, std::vector<char>(name.begin(), name.end()));
    } else {
      store.wait({name_key}, o.timeout);
      name = text_of(store.get(name_key));
      mapping = attach(name);
    }
  } catch (const StoreTimeout& e) {
    throw RendezvousError(what + ": rank 0 never published its shared-memory segment: " + e.what(), true);
  } catch (const RuntimeError& e) {
    if (rank == 0 && !name.empty()) shm::Segment::unlink(name);
    throw RendezvousError(what + ": " + e.what() + " (shared memory needs every rank of the group on one host)", false);
  }
  store.set("shm/mapped/" + std::to_string(rank), {'1'});
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/mapped/" + std::to_string(r));
    try {
      store.wait(keys, o.timeout);
    } catch (const StoreTimeout& e) {
      shm::Segment::unlink(name);
      throw RendezvousError(what + ": not every rank mapped the shared-memory segment " + name + ": " + e.what(), true);
    }
    if (!std::getenv("PARLAB_SHM_KEEP_NAMES")) shm::Segment::unlink(name);
  }
  return mapping;
}

// Joins, then maps the group's segment on every rank.
std::unique_ptr<shm::Group> connect_group(Store& store, int rank, int size, const ShmOptions& o,
                                          const std::string& what) {
  join_rendezvous(store, rank, size, o.timeout, what);
  shm::Segment segment = map_on_every_rank<shm::Segment>(
      store, rank, size, o, what,
      [&](const std::string& name) { return shm::Segment::create(name, size, o.slot_bytes, o.channel_bytes); },
      [&](const std::string& name) { return shm::Segment::attach(name, size); });
  return std::make_unique<shm::Group>(std::move(segment), rank);
}

// Registered memory for one allocate_registered call (its own scoped store).
shm::Arena connect_arena(Store& store, int rank, int size, std::size_t block_bytes, const ShmOptions& o,
                         const std::string& what) {
  return map_on_every_rank<shm::Arena>(
      store, rank, size, o, what, [&](const std::string& name) { return shm::Arena::create(name, size, block_bytes); },
      [&](const std::string& name) { return shm::Arena::attach(name, size, block_bytes); });
}

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(std::shared_ptr<ShmWorld> world, std::unique_ptr<shm::Group> group, std::string name,
                  std::vector<int> members)
      : world_(std::move(world)),
        group_(std::move(group)),
        name_(std::move(name)),
        members_(std::move(members)),
        recorder_(
            RecorderIdentity{"shm", name_, world_->world_rank, world_->world_size, group_->rank(), group_->size()},
            world_->options.flight_recorder_capacity),
        queue_(name_, recorder_, [this](const std::exception_ptr&) { dump_after_failure(); }) {}

  std::string_view backend_name() const override { return "shm"; }
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const std::string& group_name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return members_; }
  const FlightRecorder& flight_recorder() const override { return recorder_; }

 protected:
  std::shared_ptr<Work> run_all_reduce(std::span<float> buf, const CollectiveOptions& o) override {
    const Registered reg = registered(buf);
    // Where the buffer lies is part of the call: ranks that disagree never combine data.
    const auto fp = Fingerprint()
                        .add(OpKind::kAllReduce)
                        .add(o.tag)
                        .add(buf.size())
                        .add(reg.arena ? reg.id : -1)
                        .add(reg.offset)
                        .value();
    if (reg.arena && size() > 1) {
      std::vector<const float*> at(static_cast<std::size_t>(size()));
      for (int p = 0; p < size(); ++p) at[static_cast<std::size_t>(p)] = reg.arena->block(p) + reg.offset;
      return collective(OpKind::kAllReduce, bytes(buf.size()), o,
                        [g = group_.get(), buf, at = std::move(at), keep = reg.arena, fp](const OpInfo& i) {
                          g->all_reduce_registered(buf, at, i, fp);
                        });
    }
    return collective(OpKind::kAllReduce, bytes(buf.size()), o, [g = group_.get(), buf, fp](const OpInfo& i) {
      if (g->size() > 1) g->all_reduce(buf, i, fp);
    });
  }

  RegisteredBuffer run_allocate_registered(std::size_t elements) override {
    if (size() == 1) return Communicator::run_allocate_registered(elements);
    queue_.check_usable();
    const std::size_t block = (elements * sizeof(float) + 4095) / 4096 * 4096;
    int id = 0;
    {
      std::lock_guard lock(issue_mu_);
      id = registered_made_++;
    }
    auto store =
        make_prefixed_store(world_->store, group_scope(world_->options, name_) + "/registered." + std::to_string(id));
    auto arena = std::make_shared<shm::Arena>(
        connect_arena(*store, rank(), size(), block, world_->options, "registered memory of group " + name_));
    std::lock_guard lock(registered_mu_);
    std::erase_if(registered_, [](const auto& r) { return r.arena.expired(); });
    registered_.push_back({arena, id});
    return {std::span<float>(arena->block(rank()), elements), arena};
  }
  std::shared_ptr<Work> run_reduce_scatter(std::span<const float> in, std::span<float> out,
                                           const CollectiveOptions& o) override {
    const std::vector<int64_t> counts(static_cast<std::size_t>(size()), static_cast<int64_t>(out.size()));
    return run_reduce_scatter_v(in, counts, out, o);
  }
  std::shared_ptr<Work> run_reduce_scatter_v(std::span<const float> in, std::span<const int64_t> counts,
                                             std::span<float> out, const CollectiveOptions& o) override {
    return sharded(
        OpKind::kReduceScatter, in, bytes(in.size()), counts, o,
        [in, out](shm::Group& g, const std::vector<int64_t>& c, const Placement& at, const OpInfo& i,
                  std::uint64_t fp) {
          g.reduce_scatter_registered(in, c, out, at.blocks, at.block_elements, at.offset, i, fp);
        },
        [in, out](shm::Group& g, const std::vector<int64_t>& c, const OpInfo& i, std::uint64_t fp) {
          g.reduce_scatter(in, c, out, i, fp);
        });
  }
  std::shared_ptr<Work> run_all_gather(std::span<const float> in, std::span<float> out,
                                       const CollectiveOptions& o) override {
    const std::vector<int64_t> counts(static_cast<std::size_t>(size()), static_cast<int64_t>(in.size()));
    return run_all_gather_v(in, out, counts, o);
  }
  std::shared_ptr<Work> run_all_gather_v(std::span<const float> in, std::span<float> out,
                                         std::span<const int64_t> counts, const CollectiveOptions& o) override {
    return sharded(
        OpKind::kAllGather, in, bytes(out.size()), counts, o,
        [in, out](shm::Group& g, const std::vector<int64_t>& c, const Placement& at, const OpInfo& i,
                  std::uint64_t fp) {
          g.all_gather_registered(in, out, c, at.blocks, at.block_elements, at.offset, i, fp);
        },
        [in, out](shm::Group& g, const std::vector<int64_t>& c, const OpInfo& i, std::uint64_t fp) {
          g.all_gather(in, out, c, i, fp);
        });
  }
  std::shared_ptr<Work> run_broadcast(std::span<float> buf, int root, const CollectiveOptions& o) override {
    const auto fp = Fingerprint().add(OpKind::kBroadcast).add(o.tag).add(buf.size()).add(root).value();
    return collective(OpKind::kBroadcast, bytes(buf.size()), o, [g = group_.get(), buf, root, fp](const OpInfo& i) {
      if (g->size() > 1) g->broadcast(buf, root, i, fp);
    });
  }
  std::shared_ptr<Work> run_barrier(const CollectiveOptions& o) override {
    const auto fp = Fingerprint().add(OpKind::kBarrier).add(o.tag).value();
    return collective(OpKind::kBarrier, 0, o, [g = group_.get(), fp](const OpInfo& i) {
      if (g->size() > 1) g->barrier(i, fp);
    });
  }
  std::shared_ptr<Work> run_send(std::span<const float> buf, int peer, const CollectiveOptions& o) override {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(OpKind::kSend, sent_[peer]++, bytes(buf.size()), o, peer);
    return submit(info, [g = group_.get(), buf, peer](const OpInfo& i) { g->send(buf, peer, i); });
  }
  std::shared_ptr<Work> run_recv(std::span<float> buf, int peer, const CollectiveOptions& o) override {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(OpKind::kRecv, received_[peer]++, bytes(buf.size()), o, peer);
    return submit(info, [g = group_.get(), buf, peer](const OpInfo& i) { g->recv(buf, peer, i); });
  }

  std::unique_ptr<Communicator> run_split(const std::vector<int>& ranks, std::string name) override {
    queue_.check_usable();
    // As Gloo's split: a key the members agree on without talking.
    std::string key = "split/" + name + "/";
    for (int r : ranks) key += std::to_string(r) + ".";
    {
      std::lock_guard lock(issue_mu_);
      key += std::to_string(splits_[key]++);
    }
    auto scoped = make_prefixed_store(world_->store, group_scope(world_->options, name_) + "/" + key);
    return connect_shm_group(world_->store, std::move(scoped), world_->world_rank, world_->world_size, ranks,
                             std::move(name), world_->options);
  }

 private:
  using Body = std::function<void(const OpInfo&)>;

  // A buffer inside this rank's block of registered memory: which allocation, and where in it.
  struct Registered {
    std::shared_ptr<shm::Arena> arena;
    int id = -1;
    std::size_t offset = 0;  // elements from the block's start
  };
  Registered registered(std::span<const float> buf) {
    std::lock_guard lock(registered_mu_);
    for (const auto& r : registered_) {
      auto arena = r.arena.lock();
      if (!arena) continue;
      const float* block = arena->block(rank());
      const std::size_t capacity = arena->block_bytes() / sizeof(float);
      if (buf.data() >= block && buf.data() + buf.size() <= block + capacity)
        return {std::move(arena), r.id, static_cast<std::size_t>(buf.data() - block)};
    }
    return {};
  }

  // Where every rank's block of a registered allocation lies in this process, and this rank's
  // input's offset in its own.
  struct Placement {
    std::vector<const float*> blocks;
    std::size_t block_elements = 0, offset = 0;
  };

  // A reduce-scatter or all-gather of `in` (counts per rank): over registered memory when `in`
  // lies in it (each rank's part read where it lies), else through staging. Registered or not,
  // and which allocation, is part of the call; the offsets may differ by rank (uneven shards cut
  // a layer at different places), and each rank's stamp carries its own.
  template <typename OnRegistered, typename OnStaged>
  std::shared_ptr<Work> sharded(OpKind op, std::span<const float> in, double n_bytes, std::span<const int64_t> counts,
                                const CollectiveOptions& o, OnRegistered on_registered, OnStaged on_staged) {
    std::vector<int64_t> c(counts.begin(), counts.end());
    const Registered reg = registered(in);
    const auto fp =
        Fingerprint().add(op).add(o.tag).add(c.data(), c.size() * sizeof(int64_t)).add(reg.arena ? reg.id : -1).value();
    if (reg.arena && size() > 1) {
      Placement at{std::vector<const float*>(static_cast<std::size_t>(size())),
                   reg.arena->block_bytes() / sizeof(float), reg.offset};
      for (int p = 0; p < size(); ++p) at.blocks[static_cast<std::size_t>(p)] = reg.arena->block(p);
      return collective(op, n_bytes, o,
                        [g = group_.get(), c = std::move(c), at = std::move(at), keep = reg.arena, fp,
                         on_registered](const OpInfo& i) { on_registered(*g, c, at, i, fp); });
    }
    return collective(op, n_bytes, o, [g = group_.get(), c = std::move(c), fp, on_staged](const OpInfo& i) {
      on_staged(*g, c, i, fp);
    });
  }

  static double bytes(std::size_t elements) { return static_cast<double>(elements) * sizeof(float); }

  OpInfo make_info(OpKind op, std::uint64_t seq, double n_bytes, const CollectiveOptions& o, int peer) const {
    if (o.timeout.count() <= 0) {
      throw ConfigError(std::string(to_string(op)) + ".timeout", std::to_string(o.timeout.count()) + " ms",
                        "must be positive");
    }
    return OpInfo{op, seq, name_, n_bytes, o.tag, peer, o.timeout};
  }

  std::shared_ptr<Work> collective(OpKind op, double n_bytes, const CollectiveOptions& o, Body body) {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(op, next_seq_, n_bytes, o, -1);
    auto work = submit(info, std::move(body), o.caller_waits);
    ++next_seq_;  // only ops that were queued consume a number
    return work;
  }

  std::shared_ptr<Work> submit(const OpInfo& info, Body body, bool caller_waits = false) {
    return queue_.submit(
        info,
        [info, body = std::move(body)] {
          try {
            body(info);
          } catch (const CollectiveError&) {
            throw;
          } catch (const std::exception& e) {
            throw CollectiveError(info, info.describe() + " failed: " + e.what());
          }
        },
        caller_waits);
  }

  void dump_after_failure() noexcept {
    if (world_->options.dump_dir.empty()) return;
    try {
      std::filesystem::create_directories(world_->options.dump_dir);
      recorder_.dump(world_->options.dump_dir / flight_recorder_file_name(name_, world_->world_rank));
    } catch (const std::exception&) {
      // The op's own error is what the caller must see; a failed dump must not replace it.
    }
  }

  std::shared_ptr<ShmWorld> world_;
  std::unique_ptr<shm::Group> group_;
  const std::string name_;
  const std::vector<int> members_;
  FlightRecorder recorder_;
  std::mutex issue_mu_;
  std::uint64_t next_seq_ = 0;
  std::map<int, std::uint64_t> sent_, received_;
  std::map<std::string, int> splits_;
  int registered_made_ = 0;  // allocate_registered calls, which every rank makes in one order
  struct RegisteredEntry {
    std::weak_ptr<shm::Arena> arena;
    int id;
  };
  std::mutex registered_mu_;
  std::vector<RegisteredEntry> registered_;
  OpQueue queue_;  // last: its thread stops before the members above go away
};

void check_options(const ShmOptions& o) {
  if (o.timeout.count() <= 0)
    throw ConfigError("shm.timeout", std::to_string(o.timeout.count()) + " ms", "must be positive");
  if (o.attempt < 0) throw ConfigError("attempt", std::to_string(o.attempt), "must be >= 0");
  if (o.group_name.empty()) throw ConfigError("group_name", "\"\"", "must not be empty");
  if (o.slot_bytes < 4096 || o.slot_bytes % 64 != 0)
    throw ConfigError("shm.slot_bytes", std::to_string(o.slot_bytes), "must be a multiple of 64, at least 4096");
  if (o.channel_bytes < 64 || o.channel_bytes % 64 != 0)
    throw ConfigError("shm.channel_bytes", std::to_string(o.channel_bytes), "must be a multiple of 64, at least 64");
}

}  // namespace

ShmOptions shm_options_from(const GlooOptions& gloo) {
  ShmOptions o;
  o.timeout = gloo.timeout;
  o.attempt = gloo.attempt;
  o.group_name = gloo.group_name;
  o.flight_recorder_capacity = gloo.flight_recorder_capacity;
  o.dump_dir = gloo.dump_dir;
  return o;
}

std::unique_ptr<Communicator> connect_shm_group(std::shared_ptr<Store> world_store, std::shared_ptr<Store> scoped,
                                                int world_rank, int world_size, std::vector<int> members,
                                                std::string name, const ShmOptions& options) {
  check_options(options);
  const int sub_rank = static_cast<int>(std::lower_bound(members.begin(), members.end(), world_rank) - members.begin());
  const int sub_size = static_cast<int>(members.size());
  auto world = std::make_shared<ShmWorld>(ShmWorld{std::move(world_store), options, world_rank, world_size});
  auto group = connect_group(*scoped, sub_rank, sub_size, options, "shared-memory group " + name);
  return std::make_unique<ShmCommunicator>(std::move(world), std::move(group), std::move(name), std::move(members));
}

std::unique_ptr<Communicator> make_shm_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                    const ShmOptions& options) {
  if (!store) throw ConfigError("store", "null", "a rendezvous store is required");
  if (size < 1) throw ConfigError("world_size", std::to_string(size), "must be at least 1");
  if (rank < 0 || rank >= size)
    throw ConfigError("rank", std::to_string(rank), "must be in [0, " + std::to_string(size) + ")");
  check_options(options);
  auto world = std::make_shared<ShmWorld>(ShmWorld{store, options, rank, size});
  auto scoped = make_prefixed_store(store, group_scope(options, options.group_name));
  auto group =
      connect_group(*scoped, rank, size, options,
                    "rendezvous of group " + options.group_name + " (attempt " + std::to_string(options.attempt) + ")");
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) members[static_cast<std::size_t>(r)] = r;
  return std::make_unique<ShmCommunicator>(std::move(world), std::move(group), options.group_name, std::move(members));
}

}  // namespace parlab::comm
