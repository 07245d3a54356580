// The executor's contract beyond the numbers: buckets overlap the backward pass as the program
// says, dependencies hold, unsupported ops fail loudly, the layout agrees with the model's, and
// a world of one takes the same path.
#include <gtest/gtest.h>

#include <tuple>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/errors.h"
#include "runtime/comm/flight_recorder.h"
#include "runtime/model/param_layout.h"
#include "strategy/step_program.h"
#include "tests/runtime/train/tap_communicator.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using testing::RankRun;
using testing::tiny_config;
using testing::train_threads;

// A communicator that holds its first all-reduce for `delay` after it starts, then runs it (and
// every later one) on the real communicator. It has its own op thread and flight recorder, so
// the start it records is when the op began on the communication stream, before the delay.
class SlowComm final : public comm::Communicator {
 public:
  SlowComm(std::unique_ptr<comm::Communicator> inner, std::chrono::milliseconds delay)
      : inner_(std::move(inner)),
        delay_(delay),
        recorder_(comm::RecorderIdentity{"slow", inner_->group_name(), inner_->rank(), inner_->size(), inner_->rank(),
                                         inner_->size()}),
        thread_([this] { loop(); }) {}
  ~SlowComm() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::string_view backend_name() const override { return "slow"; }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& group_name() const override { return inner_->group_name(); }
  const std::vector<int>& world_ranks() const override { return inner_->world_ranks(); }
  const comm::FlightRecorder& flight_recorder() const override { return recorder_; }

 protected:
  std::shared_ptr<comm::Work> run_all_reduce(std::span<float> buf, const comm::CollectiveOptions& o) override {
    comm::OpInfo info{comm::OpKind::kAllReduce, seq_++, group_name(), double(buf.size_bytes()), o.tag, -1, o.timeout};
    auto work = std::make_shared<comm::Work>(info);
    const uint64_t id = recorder_.record(info);
    std::lock_guard lock(mu_);
    const bool slow = info.seq == 0;
    queue_.push_back([this, work, id, buf, o, slow] {
      work->start();
      recorder_.started(id);
      if (slow) std::this_thread::sleep_for(delay_);
      try {
        inner_->all_reduce(buf, o)->wait();
        recorder_.ended(id, comm::OpState::kCompleted);
        work->finish();
      } catch (...) {
        recorder_.ended(id, comm::OpState::kFailed, "inner failed");
        work->finish(std::current_exception());
      }
    });
    cv_.notify_all();
    return work;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  std::unique_ptr<comm::Communicator> inner_;
  std::chrono::milliseconds delay_;
  comm::FlightRecorder recorder_;
  uint64_t seq_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the rest exists
};

// `n` microbatches of 4 samples (of a global batch of `global_batch`) for `shape`, their inputs
// filled with small values (any will do), for executors run by hand.
std::vector<model::MicrobatchState> microbatches_of(const model::MlpShape& shape, int64_t n, int64_t global_batch) {
  std::vector<model::MicrobatchState> mbs;
  for (int64_t k = 0; k < n; ++k) {
    mbs.emplace_back(shape, 4, global_batch);
    std::span<float> x = mbs.back().activation(0);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * float(i % 7);
  }
  return mbs;
}

TEST(ExecutorTest, BucketAllReducesOverlapTheRestOfBackward) {
  // 6 blocks of h 256, f 1024 with 2 MiB buckets: about one bucket per block, the first issued
  // after the backward of the head and block 5 while blocks 4..0 (tens of milliseconds of sgemm)
  // remain, ample time for the comm thread to be scheduled even on a loaded machine. The first
  // all-reduce is held 300 ms on the comm stream: an executor that waited for a bucket before
  // going on with backward would show it in the event order.
  const std::string plan = "gbs=128,mb=64,bucket_mb=2";
  TrainConfig cfg = tiny_config(plan, 2, 128);
  cfg.model = strategy::parse_model_toml(
      "name = \"small\"\nkind = \"mlp\"\nlayers = 6\nhidden = 256\nffn = 1024\nclasses = 4\n"
      "microbatch = 64\nprecision = \"fp32\"\n",
      "small.toml");
  cfg.plan = resolve_train_plan(cfg.model, plan, 2, strategy::load_cluster("cpu-local"));
  auto wrap = [](std::unique_ptr<comm::Communicator> c) -> std::unique_ptr<comm::Communicator> {
    return std::make_unique<SlowComm>(std::move(c), std::chrono::milliseconds(300));
  };
  const auto runs = train_threads(2, cfg, 1, wrap);
  ASSERT_EQ(runs.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const std::vector<OpEvent>& events = runs[r].records.at(0).events;
    std::vector<const OpEvent*> reduces, backwards;
    const OpEvent* optimizer = nullptr;
    for (const OpEvent& e : events) {
      if (e.op == "all-reduce") reduces.push_back(&e);
      if (e.op == "backward") backwards.push_back(&e);
      if (e.op == "optimizer") optimizer = &e;
    }
    ASSERT_GE(reduces.size(), 3u);
    ASSERT_NE(optimizer, nullptr);
    double last_backward_end = 0;
    for (const OpEvent* b : backwards) last_backward_end = std::max(last_backward_end, b->end_seconds);
    std::sort(reduces.begin(), reduces.end(),
              [](const OpEvent* a, const OpEvent* b) { return a->start_seconds < b->start_seconds; });
    // The first bucket's all-reduce began while backward still had layers to go, and backward
    // finished all of them before that all-reduce ended: it ran underneath.
    EXPECT_LT(reduces.front()->start_seconds, last_backward_end) << "rank " << r;
    EXPECT_LT(last_backward_end, reduces.front()->end_seconds) << "rank " << r << ": backward waited for a bucket";
    // Several buckets were issued before the last backward op ended (they queue behind the held
    // one), buckets run in program order on the one comm stream, and the optimizer waits for all.
    const auto issued_early = std::count_if(reduces.begin(), reduces.end(),
                                            [&](const OpEvent* e) { return e->op_id < backwards.back()->op_id; });
    EXPECT_GE(issued_early, 2) << "rank " << r;
    for (size_t i = 1; i < reduces.size(); ++i)
      EXPECT_LE(reduces[i - 1]->end_seconds, reduces[i]->start_seconds + 1e-6) << "rank " << r;
    for (const OpEvent* e : reduces) EXPECT_LE(e->end_seconds, optimizer->start_seconds + 1e-6) << "rank " << r;
    // And the main thread's wait for them is the exposed communication.
    EXPECT_GT(runs[r].records[0].times.exposed_comm_seconds, 0.0);
  }
}

TEST(ExecutorTest, ASkippedStepIssuesNoCollectiveAndTagsCarryTheStep) {
  // Both ranks skip step 1's collectives (so nobody hangs): step 1 issues no all-reduce, the
  // others are tagged with their step, and the ranks' weights part ways (each applied its own
  // unreduced gradient at step 1) where a run without the skip keeps them equal.
  const TrainConfig cfg = tiny_config("gbs=16,mb=4", 2, 64);
  const std::vector<std::shared_ptr<testing::TapLog>> logs = {std::make_shared<testing::TapLog>(),
                                                              std::make_shared<testing::TapLog>()};
  auto wrap = [&](std::unique_ptr<comm::Communicator> c) -> std::unique_ptr<comm::Communicator> {
    const int rank = c->rank();
    return std::make_unique<testing::TapCommunicator>(std::move(c), logs[rank]);
  };
  TrainerOptions skip;
  skip.faults.skip_collectives_step = 1;
  const auto runs = train_threads(2, cfg, 3, wrap, skip);
  ASSERT_EQ(runs.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    // One bucket per step: the tiny model's 34 kB of gradients fit the 25 MB default bucket.
    std::vector<std::string> reduces;
    for (const std::string& t : logs[r]->tags)
      if (t.rfind("all-reduce ", 0) == 0) reduces.push_back(t.substr(std::string("all-reduce ").size()));
    EXPECT_EQ(reduces, (std::vector<std::string>{"s0/grad.bucket0", "s2/grad.bucket0"})) << "rank " << r;
    const StepRecord& skipped = runs[r].records.at(1);
    EXPECT_EQ(std::count_if(skipped.events.begin(), skipped.events.end(),
                            [](const OpEvent& e) { return e.op == "all-reduce"; }),
              0);
    EXPECT_EQ(skipped.times.comm_seconds, 0.0);
    EXPECT_GT(skipped.times.backward_seconds, 0.0);  // the compute still ran
  }
  EXPECT_GT(testing::relative_diff(runs[0].params, runs[1].params), 0.0);
  const auto healthy = train_threads(2, cfg, 3);
  EXPECT_EQ(testing::relative_diff(healthy[0].params, healthy[1].params), 0.0);
}

// Trains `steps` steps on 2 threads, each rank's communicators tapped; the logs by rank.
std::vector<std::shared_ptr<testing::TapLog>> tapped_run(const TrainConfig& cfg, int steps,
                                                         std::vector<RankRun>* runs = nullptr) {
  const std::vector<std::shared_ptr<testing::TapLog>> logs = {std::make_shared<testing::TapLog>(),
                                                              std::make_shared<testing::TapLog>()};
  auto wrap = [&](std::unique_ptr<comm::Communicator> c) -> std::unique_ptr<comm::Communicator> {
    const int rank = c->rank();
    return std::make_unique<testing::TapCommunicator>(std::move(c), logs[rank]);
  };
  auto out = train_threads(2, cfg, steps, wrap);
  if (runs) *runs = std::move(out);
  return logs;
}

// The step tags ("s<step>/...") of the ops of `kind` ("all-gather ") whose tag contains `part`.
std::vector<std::string> step_tags(testing::TapLog& log, const std::string& kind, const std::string& part) {
  std::vector<std::string> out;
  for (const std::string& t : log.tags)
    if (t.rfind(kind + "s", 0) == 0 && t.find(part) != std::string::npos) out.push_back(t.substr(kind.size()));
  return out;
}

// DDP's and ZeRO-1's gradients live in the DP group's registered memory (on shared memory their
// all-reduces and reduce-scatters then read the peers' gradients in place): every bucket
// collective of every step is a span of it, on every rank, and the weights still agree.
TEST(ExecutorTest, DdpBucketsAreSpansOfTheGroupsRegisteredMemory) {
  for (const char* plan : {"gbs=16,mb=4,bucket_mb=0.01", "gbs=16,mb=4,zero=1"}) {
    const TrainConfig cfg = tiny_config(plan, 2, 64);
    std::vector<RankRun> runs;
    const auto logs = tapped_run(cfg, 2, &runs);
    for (int r = 0; r < 2; ++r) {
      const bool zero1 = std::string(plan).find("zero=1") != std::string::npos;
      const std::vector<std::string> buckets = step_tags(*logs[r], zero1 ? "reduce-scatter " : "all-reduce ", "");
      ASSERT_EQ(logs[r]->registered.size(), 1u) << "rank " << r;
      EXPECT_EQ(static_cast<int64_t>(logs[r]->registered[0].size()), model::ParamLayout(mlp_shape(cfg.model)).numel());
      EXPECT_GE(buckets.size(), 2u) << plan << ": a bucket collective per step at least";
      EXPECT_EQ(zero1 ? logs[r]->reduce_scatters_in_registered : logs[r]->all_reduces_in_registered, buckets)
          << plan << " rank " << r;
    }
    EXPECT_EQ(testing::relative_diff(runs[0].params, runs[1].params), 0.0) << plan;
  }
}

// ZeRO-3's parameter shards live in the DP group's registered memory (on shared memory each
// per-layer gather then copies the peers' chunks straight from their shards): one allocation of
// the largest shard per rank, every layer gather of every step reads from it.
TEST(ExecutorTest, ZeroThreeGathersReadTheShardsFromRegisteredMemory) {
  const TrainConfig cfg = tiny_config("gbs=16,mb=4,zero=3", 2, 64);
  const auto logs = tapped_run(cfg, 2);
  const int64_t n = model::ParamLayout(mlp_shape(cfg.model)).numel();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(logs[r]->registered.size(), 2u) << "rank " << r << ": the shard and the bucket ring";
    EXPECT_EQ(static_cast<int64_t>(logs[r]->registered[0].size()), (n + 1) / 2);
    const std::vector<std::string> gathers = step_tags(*logs[r], "all-gather ", "/param.");
    EXPECT_GT(gathers.size(), 4u) << "a gather per layer and pass";
    std::vector<std::string> registered;  // the step's gathers (the final export's gather reads it too)
    for (const std::string& t : logs[r]->all_gathers_in_registered)
      if (t.find("/param.") != std::string::npos) registered.push_back(t);
    EXPECT_EQ(registered, gathers) << "rank " << r;
  }
}

// ZeRO-2/3's gradient buckets take slots of a ring of three of the largest bucket in the DP
// group's registered memory, reused within the step: with buckets of a layer or more (at most two
// open at once) every bucket's reduce-scatter reads from it. Buckets smaller than a layer keep more open
// than the ring holds: those the ring cannot take are made in ordinary memory, the same ones on
// every rank (program order decides), so the ranks never disagree and the weights still agree.
TEST(ExecutorTest, ZeroBucketsTakeSlotsOfARegisteredRing) {
  for (const char* plan : {"gbs=16,mb=4,zero=2,bucket_mb=0.02", "gbs=16,mb=4,zero=3,bucket_mb=0.02",
                           "gbs=16,mb=4,zero=3,bucket_mb=0.005"}) {
    const bool small = std::string(plan).find("0.005") != std::string::npos;
    const TrainConfig cfg = tiny_config(plan, 2, 64);
    std::vector<RankRun> runs;
    const auto logs = tapped_run(cfg, 2, &runs);
    for (int r = 0; r < 2; ++r) {
      const std::vector<std::string> buckets = step_tags(*logs[r], "reduce-scatter ", "/grad.");
      EXPECT_GE(buckets.size(), 8u) << plan << ": two or more buckets a microbatch, two microbatches, two steps";
      if (small) {
        EXPECT_LT(logs[r]->reduce_scatters_in_registered.size(), buckets.size()) << plan;
        EXPECT_EQ(logs[r]->reduce_scatters_in_registered, logs[0]->reduce_scatters_in_registered) << plan;
      } else {
        EXPECT_EQ(logs[r]->reduce_scatters_in_registered, buckets) << plan << " rank " << r;
      }
    }
    EXPECT_EQ(testing::relative_diff(runs[0].params, runs[1].params), 0.0) << plan;
  }
}

// ZeRO-2/3's bucket work (zeroing a bucket before the backward that writes it, adding its reduced
// chunk into the shard) is the backward's part of the step, as the cost model prices it: each piece
// is an event of its own on the compute stream, apart from the layers' (no interval counted twice),
// and the backward time is the layers' plus the bucket work's. DDP has none.
TEST(ExecutorTest, ZeroBucketWorkCountsWithTheBackward) {
  for (const char* plan : {"gbs=16,mb=4,zero=2,bucket_mb=0.02", "gbs=16,mb=4,zero=3,bucket_mb=0.02", "gbs=16,mb=4"}) {
    const bool zero = std::string(plan).find("zero") != std::string::npos;
    const auto runs = train_threads(2, tiny_config(plan, 2, 64), 2);
    for (int r = 0; r < 2; ++r) {
      const StepRecord& rec = runs[r].records.at(1);
      std::map<std::string, double> by_op;
      int bucket_events = 0;
      std::vector<std::pair<double, double>> compute;
      for (const OpEvent& e : rec.events) {
        by_op[e.op] += e.end_seconds - e.start_seconds;
        if (e.stream == "compute") compute.emplace_back(e.start_seconds, e.end_seconds);
        if (e.op != "bucket-work") continue;
        ++bucket_events;
        EXPECT_EQ(e.stream, "compute") << plan;
        EXPECT_EQ(e.tag.rfind("grad.", 0), 0u) << plan << ": " << e.tag << " names its bucket";
      }
      // Two microbatches, two or more buckets each: a zeroing and an accumulation per bucket.
      if (zero) {
        EXPECT_GE(bucket_events, 8) << plan << " rank " << r;
      } else {
        EXPECT_EQ(bucket_events, 0) << plan << " rank " << r;
      }
      EXPECT_NEAR(by_op["backward"] + by_op["bucket-work"], rec.times.backward_seconds, 1e-9) << plan;
      std::sort(compute.begin(), compute.end());
      for (size_t k = 1; k < compute.size(); ++k)
        EXPECT_GE(compute[k].first, compute[k - 1].second - 1e-9) << plan << ": compute-stream events overlap";
    }
  }
}

TEST(ExecutorTest, LocalLayoutIsTheModelsParamLayout) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4", 2, 64);
  const model::ParamLayout layout(mlp_shape(cfg.model));
  const std::vector<strategy::LocalTensor> local = strategy::local_param_layout(cfg.model, cfg.plan, 0);
  ASSERT_EQ(local.size(), layout.tensors().size());
  for (size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(local[i].name, layout.tensors()[i].name);
    EXPECT_EQ(local[i].offset, layout.tensors()[i].offset) << local[i].name;
    EXPECT_EQ(local[i].numel, layout.tensors()[i].numel) << local[i].name;
    EXPECT_EQ(local[i].layer, layout.tensors()[i].layer) << local[i].name;
  }
  // Hand count: blocks of 32*64 + 64 + 64*32 + 32 = 4192, head 4*32 + 4 = 132.
  EXPECT_EQ(layout.numel(), 2 * 4192 + 132);
}

TEST(ExecutorTest, UnsupportedPlansFailBeforeTheFirstStepNamingTheKeyAndTheOp) {
  // A whole strategy the runtime cannot train is refused by its plan key, before any process.
  for (const auto& [plan, key, world] : {std::tuple{"gbs=16,mb=4,tp=2,pp=2,sp=on", "plan.sp", 4},
                                         std::tuple{"gbs=16,mb=4,pp=2,dp=2,zero=1", "plan.zero", 4}}) {
    const TrainConfig cfg = tiny_config(plan, world, 64);
    try {
      check_runtime_supports(cfg.model, cfg.plan);
      FAIL() << plan << " should be refused by this runtime";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(key), std::string::npos) << m;
    }
  }
  // Tensor and pipeline parallelism are supported (tp_pp_test.cpp trains them).
  EXPECT_NO_THROW(check_runtime_supports(tiny_config("gbs=16,mb=4,tp=2", 2, 64).model,
                                         tiny_config("gbs=16,mb=4,tp=2", 2, 64).plan));
  EXPECT_NO_THROW(check_runtime_supports(tiny_config("gbs=16,mb=4,pp=2", 2, 64).model,
                                         tiny_config("gbs=16,mb=4,pp=2", 2, 64).plan));
  // Underneath, the dispatch table names the op it cannot follow: a coarse program's TP
  // collective reduces a whole chunk (count 2), not the one layer the model left a partial sum in.
  const TrainConfig tp = tiny_config("gbs=16,mb=4,tp=2", 2, 64);
  const strategy::StepProgram p = strategy::build_step(tp.model, tp.plan, 0, {.per_layer_ops = false});
  int refused = 0;
  for (const strategy::Op& op : p.ops) {
    const std::string why = Executor::unsupported_reason(p, op);
    if (why.empty()) continue;
    ++refused;
    EXPECT_NE(why.find("tensor-parallel"), std::string::npos) << strategy::describe(p, op) << ": " << why;
  }
  EXPECT_GT(refused, 0);
  // ZeRO is supported: dp = 1 has nothing to shard; a plan for 2 on a world of 1 is refused.
  std::unique_ptr<comm::Communicator> solo = comm::make_gloo_communicator(comm::make_in_process_store(), 0, 1, {});
  EXPECT_NO_THROW(check_runtime_supports(tiny_config("gbs=16,mb=4,zero=3", 2, 64).model,
                                         tiny_config("gbs=16,mb=4,zero=3", 2, 64).plan));
  EXPECT_NO_THROW(Trainer(tiny_config("gbs=16,mb=4,zero=3", 1, 64), *solo));
  EXPECT_THROW(Trainer(tiny_config("gbs=16,mb=4", 2, 64), *solo), ConfigError);  // world 1, plan for 2
}

// The backward adds into the gradient buffer, so a program must clear the buffer the rank holds,
// once, before its first backward: a program that does not is refused before any step runs.
TEST(ExecutorTest, AProgramMustClearItsGradientsOnceBeforeTheFirstBackward) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4", 1, 64);
  const strategy::StepProgram good = strategy::build_step(cfg.model, cfg.plan, 0, {.per_layer_ops = true});
  ASSERT_EQ(good.ops.front().kind, strategy::OpKind::kZeroGrad);
  model::LabMlp m(mlp_shape(cfg.model), 1);
  const auto opt = make_optimizer(SgdConfig{.lr = 0.1}, m.owned_range());
  const std::vector<comm::Communicator*> comms(good.groups.size(), nullptr);
  auto refused = [&](const strategy::StepProgram& p, const std::string& why) {
    try {
      Executor ex(p, m, *opt, comms);
      ADD_FAILURE() << "accepted; expected: " << why;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(Executor(good, m, *opt, comms));

  strategy::StepProgram partial = good;  // clears one element short of the buffer
  partial.ops.front().flat_end -= 1;
  refused(partial, "gradient clear range");

  strategy::StepProgram twice = good;  // a second clear after the optimizer
  strategy::Op again = good.ops.front();
  again.id = int(twice.ops.size());
  twice.ops.push_back(again);
  refused(twice, "a step clears its gradients once");

  strategy::StepProgram none = good;  // no clear: ids and dependencies renumbered without it
  none.ops.erase(none.ops.begin());
  for (strategy::Op& op : none.ops) {
    --op.id;
    std::vector<int> deps;
    for (int d : op.deps)
      if (d > 0) deps.push_back(d - 1);
    op.deps = deps;
  }
  refused(none, "accumulates gradients before the step clears them");
}

// No generator writes a broadcast yet; the handler is there for the ones that will (initial
// parameter sync). Appended to a DDP program, it gives every rank the first rank's parameters
// of its range, and only of its range: the ranks start from different weights here.
TEST(ExecutorTest, ABroadcastOpCopiesTheFirstRanksParametersOfItsRange) {
  const TrainConfig cfg = tiny_config("gbs=16,mb=4", 2, 64);
  const model::MlpShape shape = mlp_shape(cfg.model);
  const model::ParamLayout layout(shape);
  const model::FlatRange first = layout.layer_range(0);
  auto store = comm::make_in_process_store();
  std::vector<std::vector<float>> params(2);
  comm::testing::run_rank_threads(2, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    auto c = comm::make_gloo_communicator(store, r, 2, go);
    strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, r, {.per_layer_ops = true});
    strategy::Op bc;
    bc.id = static_cast<int>(p.ops.size());
    bc.kind = strategy::OpKind::kBroadcast;
    bc.stream = strategy::Stream::kComm;
    for (const strategy::Op& op : p.ops)
      if (op.kind == strategy::OpKind::kAllReduce) bc.group = op.group;
    bc.flat_begin = first.begin;
    bc.flat_end = first.end;
    bc.bytes = double(first.numel()) * sizeof(float);
    bc.tag = "param.broadcast";
    bc.deps = {bc.id - 1};  // after the optimizer
    p.ops.push_back(bc);
    model::LabMlp m(shape, 100 + r);  // different weights on each rank
    const auto opt = make_optimizer(SgdConfig{.lr = 0.1}, m.owned_range());
    std::vector<comm::Communicator*> comms(p.groups.size(), nullptr);
    comms.at(bc.group) = c.get();
    Executor ex(p, m, *opt, comms);
    std::vector<model::MicrobatchState> mbs = microbatches_of(shape, cfg.plan.microbatches, 16);
    ex.run(mbs, 0);
    params[r].assign(m.params().begin(), m.params().end());
    sync.arrive_and_wait();
  });
  size_t same_in = 0, same_out = 0;
  for (int64_t i = 0; i < layout.numel(); ++i) {
    const bool same = params[0][i] == params[1][i];
    (first.begin <= i && i < first.end ? same_in : same_out) += same ? 1 : 0;
  }
  EXPECT_EQ(same_in, size_t(first.numel())) << "layer 0 must be rank 0's on both ranks";
  EXPECT_LT(same_out, size_t(layout.numel() - first.numel()) / 2) << "the rest must stay each rank's own";
}

// Weight-gradient groups (model.h): a backward may defer its weight gradients only where the same
// layers' next backward comes before anything reads the gradients. Per microbatch, over every
// backward op of rank 0's program: DDP, ZeRO-1 and a 1F1B pipeline defer all but the last
// microbatch, also where buckets of a few layers each are reduced while the last microbatch's
// backward goes on (a bucket reads its own layers only); ZeRO-2/3 (a reduce-scatter after every
// microbatch) and a step of one microbatch defer nothing.
std::vector<int> deferring_microbatches(const std::string& plan, int world, int blocks = 2) {
  const TrainConfig cfg = tiny_config(plan, world, 64, SgdConfig{.lr = 0.1, .momentum = 0.9}, blocks);
  const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, 0, {.per_layer_ops = true});
  const std::vector<char> deferrable = Executor::deferrable_backwards(p, model::ParamLayout(mlp_shape(cfg.model)));
  std::map<int, std::pair<int, int>> by_mb;  // microbatch -> (backward ops, deferrable ones)
  for (const strategy::Op& op : p.ops) {
    EXPECT_TRUE(op.kind == strategy::OpKind::kBackward || !deferrable[size_t(op.id)]) << plan << ": op " << op.id;
    if (op.kind != strategy::OpKind::kBackward) continue;
    ++by_mb[op.microbatch].first;
    by_mb[op.microbatch].second += deferrable[size_t(op.id)];
  }
  std::vector<int> out;
  for (const auto& [mb, counts] : by_mb) {
    EXPECT_TRUE(counts.second == 0 || counts.second == counts.first) << plan << ": microbatch " << mb;
    if (counts.second > 0) out.push_back(mb);
  }
  return out;
}

TEST(ExecutorTest, BackwardsDeferWeightGradientsOnlyBeforeTheSameLayersNextBackward) {
  const std::vector<int> three{0, 1, 2};
  EXPECT_EQ(deferring_microbatches("gbs=32,mb=4", 2), three) << "DDP";
  EXPECT_EQ(deferring_microbatches("gbs=32,mb=4,bucket_mb=0.008", 2, 6), three) << "DDP, a bucket every layer or two";
  EXPECT_EQ(deferring_microbatches("gbs=32,mb=4,bucket_mb=0.008,zero=1", 2, 6), three) << "ZeRO-1, small buckets";
  EXPECT_EQ(deferring_microbatches("gbs=32,mb=4,zero=1", 2), three) << "ZeRO-1";
  EXPECT_EQ(deferring_microbatches("gbs=16,mb=4,pp=2,schedule=1f1b", 2), three) << "1F1B (the plan groups none)";
  EXPECT_EQ(deferring_microbatches("gbs=16,mb=4,tp=2", 2), three) << "TP (the slices compute their own)";
  EXPECT_TRUE(deferring_microbatches("gbs=32,mb=4,zero=2", 2).empty()) << "ZeRO-2";
  EXPECT_TRUE(deferring_microbatches("gbs=32,mb=4,zero=3", 2).empty()) << "ZeRO-3";
  EXPECT_TRUE(deferring_microbatches("gbs=8,mb=4", 2).empty()) << "one microbatch a rank";
}

// A model that defers where the program says it must not (a broken analysis, here forced) is
// caught before the optimizer reads a gradient the group still holds.
class AlwaysDeferring final : public model::LabMlp {
 public:
  using model::LabMlp::LabMlp;
  void set_weight_grads_deferrable(bool) override { model::LabMlp::set_weight_grads_deferrable(true); }
};

TEST(ExecutorTest, AGradientReadWhileAGroupHoldsRowsIsRefused) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4", 1, 64);
  const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, 0, {.per_layer_ops = true});
  const model::MlpShape shape = mlp_shape(cfg.model);
  for (const bool forced : {false, true}) {
    std::unique_ptr<model::LabMlp> m =
        forced ? std::make_unique<AlwaysDeferring>(shape, 1, 0, shape.num_layers(),
                                                   model::ModelStorage{.weight_grad_group = 4})
               : std::make_unique<model::LabMlp>(shape, 1, 0, shape.num_layers(),
                                                 model::ModelStorage{.weight_grad_group = 4});
    const auto opt = make_optimizer(SgdConfig{.lr = 0.1}, m->owned_range());
    Executor ex(p, *m, *opt, std::vector<comm::Communicator*>(p.groups.size(), nullptr));
    std::vector<model::MicrobatchState> mbs = microbatches_of(shape, cfg.plan.microbatches, 8);
    if (!forced) {
      EXPECT_NO_THROW(ex.run(mbs, 0));
      EXPECT_FALSE(m->weight_grads_pending());
      continue;
    }
    try {
      ex.run(mbs, 0);
      ADD_FAILURE() << "the optimizer ran on gradients a group still held";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("weight-gradient group"), std::string::npos) << e.what();
    }
  }
}

TEST(ExecutorTest, WorldOfOneUsesTheSamePathAndRecordsEveryPart) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4", 1, 64);
  const auto runs = train_threads(1, cfg, 2);
  ASSERT_EQ(runs.size(), 1u);
  const StepRecord& rec = runs[0].records.at(1);
  EXPECT_EQ(rec.samples, 8);
  EXPECT_EQ(rec.global_batch, 8);
  const StepTimes& t = rec.times;
  EXPECT_GT(t.forward_seconds, 0.0);
  EXPECT_GT(t.backward_seconds, 0.0);
  EXPECT_GT(t.optimizer_seconds, 0.0);
  EXPECT_EQ(t.comm_seconds, 0.0);  // no collectives at dp = 1
  // The gradient clear, two microbatches x (3 layers forward + 3 backward), optimizer, data.
  ASSERT_EQ(rec.events.size(), 1 + 2u * 6 + 1 + 1);
  EXPECT_EQ(rec.events.front().op, "zero-grad");
  // Each part against its ops' own events (recorded op by op, apart from the totals the parts
  // come from), and every event inside the step's wall-clock window [end - step, end]: a part
  // that drops an op or counts one twice, or a step time that misses work, fails here. (The idle
  // part is what is left of the step, so summing the parts back would prove nothing.)
  std::map<std::string, double> by_op;
  std::map<std::string, int> count;
  const double step_begin = rec.end_seconds - t.step_seconds;
  double compute = 0;
  for (const OpEvent& e : rec.events) {
    ASSERT_LE(e.start_seconds, e.end_seconds) << e.op << " " << e.tag;
    EXPECT_GE(e.start_seconds, step_begin - 1e-6) << e.op << " " << e.tag << " starts before the step";
    EXPECT_LE(e.end_seconds, rec.end_seconds + 1e-6) << e.op << " " << e.tag << " ends after the step";
    by_op[e.op] += e.end_seconds - e.start_seconds;
    ++count[e.op];
    if (e.stream == "compute") compute += e.end_seconds - e.start_seconds;
  }
  EXPECT_EQ(count["forward"], 6);
  EXPECT_EQ(count["backward"], 6);
  EXPECT_EQ(count["optimizer"], 1);
  EXPECT_EQ(count["zero-grad"], 1);
  EXPECT_EQ(count["data"], 1);
  EXPECT_NEAR(by_op["forward"], t.forward_seconds, 1e-9);
  EXPECT_NEAR(by_op["backward"], t.backward_seconds, 1e-9);
  // The clear is the optimizer's part of the step too (optimizer.zero_grad()).
  EXPECT_NEAR(by_op["optimizer"] + by_op["zero-grad"], t.optimizer_seconds, 1e-9);
  EXPECT_NEAR(by_op["data"], t.data_seconds, 1e-9);
  // One compute stream runs its ops one after another, so they fit in the step.
  EXPECT_LE(compute, t.step_seconds + 1e-6);
  EXPECT_GE(t.idle_seconds, 0.0);
}

// The hook the trainer sends a rank's compute thread home with (core_home.h) runs twice a step, on
// the compute thread: before the update changes a weight, and after the step's last op.
TEST(ExecutorTest, TheAfterMeetingHookRunsBeforeTheUpdateAndAtTheStepsEnd) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4", 1, 64);
  const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, 0, {.per_layer_ops = true});
  const model::MlpShape shape = mlp_shape(cfg.model);
  model::LabMlp m(shape, 1);
  const auto opt = make_optimizer(SgdConfig{.lr = 0.1}, m.owned_range());
  const std::vector<float> initial(m.params().begin(), m.params().end());
  std::vector<bool> unchanged_at_call;
  std::vector<std::thread::id> callers;
  ExecutorOptions eo;
  eo.after_meeting = [&] {
    unchanged_at_call.push_back(std::equal(initial.begin(), initial.end(), m.params().begin()));
    callers.push_back(std::this_thread::get_id());
  };
  Executor ex(p, m, *opt, std::vector<comm::Communicator*>(p.groups.size(), nullptr), eo);
  std::vector<model::MicrobatchState> mbs = microbatches_of(shape, cfg.plan.microbatches, 8);
  ex.run(mbs, 0);
  ASSERT_EQ(unchanged_at_call.size(), 2u);
  EXPECT_TRUE(unchanged_at_call[0]) << "the first call came after the update";
  EXPECT_FALSE(unchanged_at_call[1]) << "the second call came before the update";
  for (const std::thread::id& c : callers) EXPECT_EQ(c, std::this_thread::get_id());
}

// A tensor-parallel all-reduce blocks the compute stream from its issue to its end, and it runs on
// the calling thread where the communicator's thread is idle (caller_waits): its whole time is the
// step's exposed communication, never its idle part.
TEST(ExecutorTest, InlineTensorParallelCollectivesAreExposedCommunication) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4,tp=2", 2, 64);
  const auto runs = train_threads(2, cfg, 2);
  for (const RankRun& run : runs) {
    const StepRecord& rec = run.records.at(1);
    double tp = 0;
    int calls = 0;
    for (const OpEvent& e : rec.events)
      if (e.stream == "compute" && e.op == "all-reduce") tp += e.end_seconds - e.start_seconds, ++calls;
    ASSERT_GT(calls, 0) << "no tensor-parallel all-reduce on the compute stream";
    EXPECT_GT(tp, 0.0);
    EXPECT_GE(rec.times.exposed_comm_seconds, tp - 1e-6) << calls << " all-reduces";
  }
}

// Issuing a communication-stream collective holds the compute stream for as long as the issue
// call takes (its buffer, the call, waking the communicator's thread): that is exposed
// communication, never idle. Each ZeRO-3 gather and reduce-scatter's issue is held 3 ms here.
TEST(ExecutorTest, TheTimeSpentIssuingACollectiveIsExposedCommunication) {
  const TrainConfig cfg = tiny_config("gbs=8,mb=4,zero=3", 2, 64);
  auto log = std::make_shared<testing::TapLog>();
  log->issue_delay = std::chrono::milliseconds(3);
  auto wrap = [&](std::unique_ptr<comm::Communicator> c) -> std::unique_ptr<comm::Communicator> {
    return std::make_unique<testing::TapCommunicator>(std::move(c), log);
  };
  const auto runs = train_threads(2, cfg, 2, wrap);
  int64_t issued = 0;  // step 1's gathers and reduce-scatters, both ranks
  for (const std::string& t : log->tags)
    if (t.rfind("all-gather s1/", 0) == 0 || t.rfind("reduce-scatter s1/", 0) == 0) ++issued;
  ASSERT_GT(issued, 0);
  const double held = 0.003 * double(issued) / 2;  // a rank's
  for (const RankRun& run : runs) {
    const StepTimes& t = run.records.at(1).times;
    EXPECT_GE(t.exposed_comm_seconds, 0.9 * held) << issued / 2 << " issues a rank";
    EXPECT_LT(t.idle_seconds, 0.5 * held) << "the issues were booked as idle";
  }
}

}  // namespace
}  // namespace parlab::train
