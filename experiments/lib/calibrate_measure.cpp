#include "experiments/lib/calibrate_measure.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/comm/backend_choice.h"
#include "runtime/comm/collective_bench.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/train/optimizer.h"
#include "strategy/collectives.h"
#include "base/errors.h"

namespace parlab::experiments::measure {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs `body` on `n` ranks: threads of this process, each with its own communicator (its own
// Gloo context and sockets over loopback, or its mapping of the group's shared-memory segment),
// as separate processes would have, through the backend `parlab train --comm auto` gives ranks of
// one host (shared memory) unless `choice` says otherwise. The first rank's error is rethrown.
void on_ranks(int n, const std::function<void(comm::Communicator&, int rank)>& body,
              comm::CommChoice choice = comm::CommChoice::kAuto) {
  auto store = comm::make_in_process_store();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = std::chrono::seconds(60);
        auto c = comm::make_communicator(store, r, n, go, choice);
        body(*c, r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw RuntimeError("calibrate: Gloo measurement failed: " + e);
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double seconds_of(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }

}  // namespace

namespace {
std::vector<double> timed_steps(model::LabMlp& net, const model::MlpShape& shape, int64_t b, int reps) {
  std::vector<double> times;
  for (int i = 0; i <= reps; ++i) {
    auto mb = net.new_microbatch(b, b);
    auto x = mb.activation(0);
    for (size_t k = 0; k < x.size(); ++k) x[k] = float((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
    auto labels = mb.labels();
    for (size_t k = 0; k < labels.size(); ++k) labels[k] = int32_t(k % size_t(shape.classes));
    const auto t0 = Clock::now();
    net.forward(mb);
    net.backward(mb);
    if (i > 0) times.push_back(since(t0));  // the first step pays page faults
  }
  return times;
}
}  // namespace

std::vector<double> step_seconds(const model::MlpShape& shape, int64_t b, int reps) {
  model::LabMlp net(shape, 1);
  return timed_steps(net, shape, b, reps);
}

std::vector<double> mixed_step_seconds(const model::MlpShape& shape, int64_t b, int reps) {
  model::LabMlp net(shape, 1);
  net.set_mixed_precision(true);  // throws RuntimeError naming the reason without bf16 matmuls
  return timed_steps(net, shape, b, reps);
}

std::vector<std::vector<double>> interleaved_step_seconds(
    const std::vector<std::pair<model::MlpShape, int64_t>>& shapes, int reps,
    std::vector<std::vector<double>>* forward) {
  std::vector<std::unique_ptr<model::LabMlp>> nets;
  std::vector<model::MicrobatchState> mbs;
  for (const auto& [shape, b] : shapes) {
    nets.push_back(std::make_unique<model::LabMlp>(shape, 1));
    mbs.push_back(nets.back()->new_microbatch(b, b));
    auto x = mbs.back().activation(0);
    for (size_t k = 0; k < x.size(); ++k) x[k] = float((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
    auto labels = mbs.back().labels();
    for (size_t k = 0; k < labels.size(); ++k) labels[k] = int32_t(k % size_t(shape.classes));
  }
  std::vector<std::vector<double>> times(shapes.size());
  if (forward) forward->assign(shapes.size(), {});
  for (int i = 0; i <= reps; ++i)
    for (size_t s = 0; s < shapes.size(); ++s) {
      const auto t0 = Clock::now();
      nets[s]->forward(mbs[s]);
      const double f = since(t0);
      nets[s]->backward(mbs[s]);
      if (i == 0) continue;  // the first step pays page faults
      times[s].push_back(since(t0));
      if (forward) (*forward)[s].push_back(f);
    }
  return times;
}

std::vector<double> concurrent_step_flops(const model::MlpShape& shape, int64_t microbatch, int k, int reps) {
  const double flops = model::LabMlp::step_matmul_flops(shape, microbatch);
  int go[2], results[2];
  if (::pipe(go) != 0 || ::pipe(results) != 0) throw RuntimeError("calibrate: pipe failed");
  std::vector<pid_t> pids;
  for (int i = 0; i < k; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) throw RuntimeError("calibrate: fork failed");
    if (pid == 0) {
      ::close(go[1]);
      ::close(results[0]);
      char c;
      if (::read(go[0], &c, 1) != 1) ::_exit(2);
      double f = 0;
      try {
        f = flops / parlab::median(step_seconds(shape, microbatch, reps));
      } catch (...) {
        ::_exit(3);
      }
      if (::write(results[1], &f, sizeof f) != sizeof f) ::_exit(4);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  ::close(results[1]);
  // They start together on a pipe byte.
  const std::string start(size_t(k), 'g');
  if (::write(go[1], start.data(), start.size()) != ssize_t(start.size()))
    throw RuntimeError("calibrate: start failed");
  ::close(go[1]);
  std::vector<double> out;
  double f;
  while (::read(results[0], &f, sizeof f) == ssize_t(sizeof f)) out.push_back(f);
  ::close(results[0]);
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
  }
  if (int(out.size()) != k) throw RuntimeError("calibrate: a measuring process failed");
  return out;
}

std::vector<double> optimizer_bytes_per_s(const model::MlpShape& shape, int reps) {
  model::LabMlp net(shape, 1);
  auto opt = train::make_optimizer(train::AdamWConfig{}, {0, int64_t(net.params().size())});
  std::fill(net.grads().begin(), net.grads().end(), 1e-3f);
  std::vector<double> rates;
  for (int i = 0; i <= reps; ++i) {
    const auto t0 = Clock::now();
    opt->step(net.params(), net.grads());
    const double s = since(t0);
    if (i > 0) rates.push_back(double(net.params().size()) * 28.0 / s);  // bytes moved per AdamW element
  }
  return rates;
}

double memcpy_bytes_per_s() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> times;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    times.push_back(since(t0));
  }
  return double(bytes) / parlab::median(times);
}

double burst_seconds(int n, double bytes, int calls, int repeats, comm::CommChoice choice) {
  double out = 0;
  on_ranks(
      n,
      [&](comm::Communicator& c, int r) {
        const size_t per = size_t(bytes / 4) / size_t(n) * size_t(n);
        // In the group's registered memory, where DDP's gradients live (trainer.cpp).
        const comm::RegisteredBuffer reg = c.allocate_registered(per * size_t(calls));
        const std::span<float> buf = reg.data;
        std::fill(buf.begin(), buf.end(), 1.0f);
        c.all_reduce(buf)->wait();  // connect and warm up
        std::vector<double> times;
        for (int rep = 0; rep < repeats; ++rep) {
          c.barrier()->wait();
          const auto t0 = Clock::now();
          std::vector<std::shared_ptr<comm::Work>> work;
          for (int k = 0; k < calls; ++k) work.push_back(c.all_reduce(buf.subspan(size_t(k) * per, per)));
          for (auto& w : work) w->wait();
          times.push_back(since(t0));
        }
        if (r == 0) out = parlab::median(times);
      },
      choice);
  return out;
}

int calls_per_burst(double bytes) { return std::clamp(int(std::lround(32e6 / bytes)), 1, 64); }

std::vector<double> allreduce_seconds(int n, const std::vector<double>& sizes, int iters, comm::CommChoice choice) {
  std::vector<double> out;
  for (double s : sizes) out.push_back(burst_seconds(n, s, calls_per_burst(s), iters, choice) / calls_per_burst(s));
  return out;
}

// Uneven chunks, as buckets and layers cut at shard boundaries give them: rank 0 holds 3/2 of
// another rank's share.
std::vector<int64_t> sharded_counts(int n, double bytes) {
  const int64_t total = std::max<int64_t>(int64_t(bytes / 4), 2 * n);
  const int64_t unit = std::max<int64_t>(1, total * 2 / (2 * n + 1));
  std::vector<int64_t> counts(size_t(n), unit);
  counts[0] = total - unit * (n - 1);
  return counts;
}

std::vector<double> sharded_seconds(strategy::CollectiveOp op, int n, const std::vector<double>& sizes, int iters) {
  if (op != strategy::CollectiveOp::kReduceScatter && op != strategy::CollectiveOp::kAllGather)
    throw ConfigError("op", std::string(strategy::to_string(op)), "reduce-scatter or all-gather");
  std::vector<double> out;
  for (double bytes : sizes) {
    const int calls = calls_per_burst(bytes);
    const std::vector<int64_t> counts = sharded_counts(n, bytes);
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    double seconds = 0;
    on_ranks(n, [&](comm::Communicator& c, int r) {
      const size_t whole = size_t(total), mine = size_t(counts[size_t(r)]);
      // As the trainer holds them: ZeRO-3's parameter shards in the group's registered memory
      // (every rank allocates the largest), and ZeRO-2/3's gradient buckets too (a ring of them,
      // train/executor_zero.cpp), which a reduce-scatter then sums where they lie instead of
      // copying them through staging; a gather's output in ordinary memory.
      const size_t largest = size_t(*std::max_element(counts.begin(), counts.end()));
      const bool buckets = op == strategy::CollectiveOp::kReduceScatter;
      std::vector<float> plain(buckets ? 0 : whole * size_t(calls), 1.0f);
      const comm::RegisteredBuffer ring =
          buckets ? c.allocate_registered(whole * size_t(calls)) : comm::RegisteredBuffer{};
      std::fill(ring.data.begin(), ring.data.end(), 1.0f);
      const std::span<float> full = buckets ? ring.data : std::span<float>(plain);
      const comm::RegisteredBuffer shard = c.allocate_registered(largest * size_t(calls));
      std::fill(shard.data.begin(), shard.data.end(), 1.0f);
      auto issue = [&](int k) {
        std::span<float> f(full.data() + size_t(k) * whole, whole);
        std::span<float> s = shard.data.subspan(size_t(k) * mine, mine);
        return op == strategy::CollectiveOp::kReduceScatter ? c.reduce_scatter_v(f, counts, s)
                                                            : c.all_gather_v(s, f, counts);
      };
      issue(0)->wait();  // connect and warm up
      std::vector<double> times;
      for (int rep = 0; rep < iters; ++rep) {
        c.barrier()->wait();
        const auto t0 = Clock::now();
        std::vector<std::shared_ptr<comm::Work>> work;
        for (int k = 0; k < calls; ++k) work.push_back(issue(k));
        for (auto& w : work) w->wait();
        times.push_back(since(t0));
      }
      if (r == 0) seconds = parlab::median(times) / calls;
    });
    out.push_back(seconds);
  }
  return out;
}

// Over loopback TCP the kernel copies every byte (several times), on the same cores the ranks
// compute on. All `n` ranks run in this process, so its CPU time covers them all:
// seconds / (iterations x n x factor(n) x S).
double comm_cpu_seconds_per_byte(int n, double bytes, int iters) {
  const size_t count = size_t(bytes / 4) / size_t(n) * size_t(n);
  double cpu_before = 0, cpu_after = 0;
  on_ranks(n, [&](comm::Communicator& c, int r) {
    const comm::RegisteredBuffer reg = c.allocate_registered(count);  // as DDP's gradients
    const std::span<float> buf = reg.data;
    std::fill(buf.begin(), buf.end(), 1.0f);
    c.all_reduce(buf)->wait();  // connect and warm up
    c.barrier()->wait();
    if (r == 0) cpu_before = process_cpu_seconds();
    for (int i = 0; i < iters; ++i) c.all_reduce(buf)->wait();
    c.barrier()->wait();
    if (r == 0) cpu_after = process_cpu_seconds();
  });
  const double sent =
      double(iters) * n * strategy::bus_bandwidth_factor(strategy::CollectiveOp::kAllReduce, n) * double(count) * 4;
  return (cpu_after - cpu_before) / sent;
}

CpuSample sample_cpu() {
  CpuSample s;
  s.wall = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  s.own = seconds_of(self.ru_utime) + seconds_of(self.ru_stime) + seconds_of(children.ru_utime) +
          seconds_of(children.ru_stime);
  std::ifstream in("/proc/stat");
  std::string line;
  std::getline(in, line);
  s.machine_busy = busy_seconds_of_proc_stat(line, double(::sysconf(_SC_CLK_TCK)));
  return s;
}

double busy_seconds_of_proc_stat(const std::string& line, double ticks_per_second) {
  // cpu user nice system idle iowait irq softirq steal ... (ticks, all cores together). Steal is
  // time a virtual machine's cores were runnable but the hypervisor ran someone else's: taken from
  // this job as surely as another process's time, so it counts as busy (a VM that slows for a
  // minute shows as load, not as a model error). Kernels before 2.6.11 have no steal column.
  std::istringstream in(line);
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu" ||
      !(ticks_per_second > 0))
    return 0;
  if (!(in >> steal)) steal = 0;
  return (user + nice + system + irq + softirq + steal) / ticks_per_second;
}

double others_busy_cores(const CpuSample& before, const CpuSample& after) {
  const double wall = after.wall - before.wall;
  if (!(wall > 0) || after.machine_busy <= 0) return 0;
  return std::max(0.0, (after.machine_busy - before.machine_busy) - (after.own - before.own)) / wall;
}

double loadavg_1min() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

}  // namespace parlab::experiments::measure
