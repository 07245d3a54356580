// The Gloo backend: a Communicator over one gloo::Context (TCP transport), its ops queued on the
// communicator's thread (OpQueue) and executed by gloo_algorithms.
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <map>

#include "runtime/comm/gloo/gloo_algorithms.h"
#include "runtime/comm/op_queue.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/comm/shm/shm_communicator.h"
#include "base/units.h"

namespace parlab::comm {
namespace {

using Millis = std::chrono::milliseconds;

double to_seconds(Millis t) { return std::chrono::duration<double>(t).count(); }

// What every communicator split off one world shares.
struct GlooWorld {
  std::shared_ptr<Store> store;  // unscoped; each group scopes its own keys
  std::shared_ptr<gloo::transport::Device> device;
  GlooOptions options;
  int world_rank = 0;
  int world_size = 1;
};

std::string strip_gloo_location(std::string text) {
  // Gloo prefixes "[/path/file.cc:81] "; keep its words, not our build paths.
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

// Runs a Gloo call, translating its exceptions for `info`.
template <typename F>
void run_translated(const OpInfo& info, F&& body) {
  try {
    body();
  } catch (const CollectiveError&) {
    throw;
  } catch (const gloo::IoException& e) {
    const std::string detail = strip_gloo_location(e.what());
    if (detail.find("Timed out") != std::string::npos) {
      throw CollectiveTimeout(info, to_seconds(info.timeout), "Gloo: " + detail);
    }
    throw CollectiveError(info, info.describe() + " failed: Gloo: " + detail);
  } catch (const std::exception& e) {
    throw CollectiveError(info, info.describe() + " failed: " + strip_gloo_location(e.what()));
  }
}

// The Gloo tag (the slot its messages travel in) of an op. Send/recv: the message number, equal
// on both sides. Collectives: the low 16 bits are the sequence number (ops run one at a time, so
// neighbouring ops never share a slot), the high 16 a hash (FNV-1a) of the caller's tag. Ranks
// that disagree on what collective #k is (one skipped a step and issued the next step's bucket
// there, "s6/grad.bucket0" against "s5/grad.bucket0") then never exchange data: every rank times
// out and the flight recorders say who disagreed, instead of the ranks silently summing
// different steps' gradients and failing somewhere later (PyTorch's desync debug finds the same
// class of bug by comparing collective fingerprints).
std::uint32_t gloo_tag(const OpInfo& info) {
  if (is_point_to_point(info.op)) return static_cast<std::uint32_t>(info.seq);
  std::uint32_t h = 2166136261u;
  for (unsigned char c : info.tag) h = (h ^ c) * 16777619u;
  const std::uint32_t folded = (h >> 16) ^ (h & 0xFFFFu);
  return (folded << 16) | static_cast<std::uint32_t>(info.seq & 0xFFFFu);
}

// Whether world ranks `ranks` share one host by `hosts` (empty: not known, so no).
bool on_one_host(const std::vector<std::string>& hosts, const std::vector<int>& ranks) {
  if (hosts.empty()) return false;
  for (int r : ranks)
    if (hosts.at(static_cast<std::size_t>(r)) != hosts.at(static_cast<std::size_t>(ranks.front()))) return false;
  return true;
}

// Keys of group `group` of attempt k live under "parlab/attempt.<k>/<group>".
std::string group_scope(const GlooOptions& o, const std::string& group) {
  return "parlab/attempt." + std::to_string(o.attempt) + "/" + group;
}

// Connects this rank into a full mesh of `size` ranks through `store`.
std::shared_ptr<gloo::Context> connect(const GlooWorld& world, Store& store, int rank, int size,
                                       const std::string& what) {
  join_rendezvous(store, rank, size, world.options.timeout, what);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(world.options.timeout);
  try {
    auto mesh = make_prefixed_store(std::shared_ptr<Store>(&store, [](Store*) {}), "mesh");
    auto device = world.device;
    context->connectFullMesh(*mesh, device);
  } catch (const StoreTimeout& e) {
    throw RendezvousError(what + ": " + e.what(), true);
  } catch (const std::exception& e) {
    throw RendezvousError(what + ": Gloo could not connect: " + strip_gloo_location(e.what()), false);
  }
  return context;
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<GlooWorld> world, std::shared_ptr<gloo::Context> context, std::string group,
                   std::vector<int> members)
      : world_(std::move(world)),
        context_(std::move(context)),
        group_(std::move(group)),
        members_(std::move(members)),
        ring_(std::make_shared<gloo_backend::RingState>(context_)),
        recorder_(
            RecorderIdentity{"gloo", group_, world_->world_rank, world_->world_size, context_->rank, context_->size},
            world_->options.flight_recorder_capacity),
        queue_(group_, recorder_, [this](const std::exception_ptr&) { dump_after_failure(); }) {}

  std::string_view backend_name() const override { return "gloo"; }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  const std::string& group_name() const override { return group_; }
  const std::vector<int>& world_ranks() const override { return members_; }
  const FlightRecorder& flight_recorder() const override { return recorder_; }
  // Read between ops (the op thread is the only writer).
  std::uint64_t ring_registrations() const { return ring_->registrations(); }
  std::size_t ring_scratch_bytes() const { return ring_->scratch_bytes(); }

 protected:
  std::shared_ptr<Work> run_all_reduce(std::span<float> buf, const CollectiveOptions& o) override {
    return collective(OpKind::kAllReduce, bytes(buf.size()), o, [ctx = context_, buf](std::uint32_t tag, Millis t) {
      gloo_backend::all_reduce(ctx, buf, tag, t);
    });
  }
  std::shared_ptr<Work> run_reduce_scatter(std::span<const float> in, std::span<float> out,
                                           const CollectiveOptions& o) override {
    const std::vector<int64_t> counts(static_cast<std::size_t>(size()), static_cast<int64_t>(out.size()));
    return run_reduce_scatter_v(in, counts, out, o);
  }
  std::shared_ptr<Work> run_reduce_scatter_v(std::span<const float> in, std::span<const int64_t> counts,
                                             std::span<float> out, const CollectiveOptions& o) override {
    return collective(OpKind::kReduceScatter, bytes(in.size()), o,
                      [ring = ring_, in, c = std::vector<int64_t>(counts.begin(), counts.end()), out](
                          std::uint32_t tag, Millis t) { ring->reduce_scatter(in, c, out, tag, t); });
  }
  std::shared_ptr<Work> run_all_gather_v(std::span<const float> in, std::span<float> out,
                                         std::span<const int64_t> counts, const CollectiveOptions& o) override {
    return collective(OpKind::kAllGather, bytes(out.size()), o,
                      [ring = ring_, in, out, c = std::vector<int64_t>(counts.begin(), counts.end())](
                          std::uint32_t tag, Millis t) { ring->all_gather(in, out, c, tag, t); });
  }
  std::shared_ptr<Work> run_all_gather(std::span<const float> in, std::span<float> out,
                                       const CollectiveOptions& o) override {
    return collective(OpKind::kAllGather, bytes(out.size()), o, [ctx = context_, in, out](std::uint32_t tag, Millis t) {
      gloo_backend::all_gather(ctx, in, out, tag, t);
    });
  }
  std::shared_ptr<Work> run_broadcast(std::span<float> buf, int root, const CollectiveOptions& o) override {
    return collective(
        OpKind::kBroadcast, bytes(buf.size()), o,
        [ctx = context_, buf, root](std::uint32_t tag, Millis t) { gloo_backend::broadcast(ctx, buf, root, tag, t); });
  }
  std::shared_ptr<Work> run_barrier(const CollectiveOptions& o) override {
    return collective(OpKind::kBarrier, 0, o,
                      [ctx = context_](std::uint32_t tag, Millis t) { gloo_backend::barrier(ctx, tag, t); });
  }
  std::shared_ptr<Work> run_send(std::span<const float> buf, int peer, const CollectiveOptions& o) override {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(OpKind::kSend, sent_[peer]++, bytes(buf.size()), o, peer);
    return submit(
        info, [ctx = context_, buf, peer](std::uint32_t tag, Millis t) { gloo_backend::send(ctx, buf, peer, tag, t); });
  }
  std::shared_ptr<Work> run_recv(std::span<float> buf, int peer, const CollectiveOptions& o) override {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(OpKind::kRecv, received_[peer]++, bytes(buf.size()), o, peer);
    return submit(
        info, [ctx = context_, buf, peer](std::uint32_t tag, Millis t) { gloo_backend::recv(ctx, buf, peer, tag, t); });
  }

  std::unique_ptr<Communicator> run_split(const std::vector<int>& ranks, std::string name) override {
    queue_.check_usable();
    // Members of the new group agree on this key without talking: it depends only on the
    // arguments and on how often this exact (name, ranks) split happened before.
    std::string key = "split/" + name + "/";
    for (int r : ranks) key += std::to_string(r) + ".";
    {
      std::lock_guard lock(issue_mu_);
      key += std::to_string(splits_[key]++);
    }
    const int me = world_->world_rank;
    const int sub_rank = static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), me) - ranks.begin());
    const int sub_size = static_cast<int>(ranks.size());
    auto store = make_prefixed_store(world_->store, group_scope(world_->options, group_) + "/" + key);
    if (on_one_host(world_->options.hosts, ranks)) {
      return connect_shm_group(world_->store, std::move(store), me, world_->world_size, ranks, std::move(name),
                               shm_options_from(world_->options));
    }
    auto context = connect(*world_, *store, sub_rank, sub_size, "split of group " + name + " from " + group_);
    return std::make_unique<GlooCommunicator>(world_, std::move(context), std::move(name), ranks);
  }

 private:
  using Body = std::function<void(std::uint32_t, Millis)>;

  static double bytes(std::size_t elements) { return static_cast<double>(elements) * sizeof(float); }

  OpInfo make_info(OpKind op, std::uint64_t seq, double n_bytes, const CollectiveOptions& o, int peer) const {
    if (o.timeout.count() <= 0) {
      throw ConfigError(std::string(to_string(op)) + ".timeout", std::to_string(o.timeout.count()) + " ms",
                        "must be positive");
    }
    return OpInfo{op, seq, group_, n_bytes, o.tag, peer, o.timeout};
  }

  std::shared_ptr<Work> collective(OpKind op, double n_bytes, const CollectiveOptions& o, Body body) {
    std::lock_guard lock(issue_mu_);
    const OpInfo info = make_info(op, next_seq_, n_bytes, o, -1);
    auto work = submit(info, std::move(body), o.caller_waits);
    ++next_seq_;  // only ops that were queued consume a number
    return work;
  }

  std::shared_ptr<Work> submit(const OpInfo& info, Body body, bool caller_waits = false) {
    const std::uint32_t tag = gloo_tag(info);
    return queue_.submit(
        info, [info, tag, body = std::move(body)] { run_translated(info, [&] { body(tag, info.timeout); }); },
        caller_waits);
  }

  void dump_after_failure() noexcept {
    if (world_->options.dump_dir.empty()) return;
    try {
      std::filesystem::create_directories(world_->options.dump_dir);
      recorder_.dump(world_->options.dump_dir / flight_recorder_file_name(group_, world_->world_rank));
    } catch (const std::exception&) {
      // The op's own error is what the caller must see; a failed dump must not replace it.
    }
  }

  std::shared_ptr<GlooWorld> world_;
  std::shared_ptr<gloo::Context> context_;
  const std::string group_;
  const std::vector<int> members_;
  // Scratch and registrations of the ring ops, reused by every call (touched by the op thread only).
  std::shared_ptr<gloo_backend::RingState> ring_;
  FlightRecorder recorder_;
  std::mutex issue_mu_;  // sequence numbers are taken in queue order
  std::uint64_t next_seq_ = 0;
  std::map<int, std::uint64_t> sent_, received_;
  std::map<std::string, int> splits_;
  OpQueue queue_;  // last: its thread stops before the members above go away
};

std::shared_ptr<gloo::transport::Device> make_device(const GlooOptions& o) {
  gloo::transport::tcp::attr attr;
  if (!o.interface.empty()) {
    attr.iface = o.interface;
  } else {
    attr.hostname = o.hostname;
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    const bool by_iface = !o.interface.empty();
    throw ConfigError(
        by_iface ? "gloo.interface" : "gloo.hostname", by_iface ? o.interface : o.hostname,
        std::string("must name an interface or address of this host (") + strip_gloo_location(e.what()) + ")");
  }
}

}  // namespace

std::uint64_t gloo_ring_registrations(const Communicator& c) {
  const auto* g = dynamic_cast<const GlooCommunicator*>(&c);
  return g ? g->ring_registrations() : 0;
}

std::size_t gloo_ring_scratch_bytes(const Communicator& c) {
  const auto* g = dynamic_cast<const GlooCommunicator*>(&c);
  return g ? g->ring_scratch_bytes() : 0;
}

std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                     const GlooOptions& options) {
  if (!store) throw ConfigError("store", "null", "a rendezvous store is required");
  if (size < 1) throw ConfigError("world_size", std::to_string(size), "must be at least 1");
  if (rank < 0 || rank >= size) {
    throw ConfigError("rank", std::to_string(rank), "must be in [0, " + std::to_string(size) + ")");
  }
  if (options.timeout.count() <= 0) {
    throw ConfigError("gloo.timeout", std::to_string(options.timeout.count()) + " ms", "must be positive");
  }
  if (options.attempt < 0) {
    throw ConfigError("attempt", std::to_string(options.attempt), "must be >= 0");
  }
  if (options.group_name.empty()) throw ConfigError("group_name", "\"\"", "must not be empty");

  auto world = std::make_shared<GlooWorld>();
  world->store = store;
  world->device = make_device(options);
  world->options = options;
  world->world_rank = rank;
  world->world_size = size;
  auto scoped = make_prefixed_store(store, group_scope(options, options.group_name));
  auto context =
      connect(*world, *scoped, rank, size,
              "rendezvous of group " + options.group_name + " (attempt " + std::to_string(options.attempt) + ")");
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) members[static_cast<std::size_t>(r)] = r;
  return std::make_unique<GlooCommunicator>(std::move(world), std::move(context), options.group_name,
                                            std::move(members));
}

}  // namespace parlab::comm
