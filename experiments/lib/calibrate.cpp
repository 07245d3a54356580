#include "experiments/lib/calibrate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/comm/collective_bench.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/optimizer.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "strategy/presets.h"
#include "strategy/toml_reader.h"
#include "strategy/units.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

model::MlpShape shape_of(const strategy::ModelSpec& m) {
  return {.hidden = m.hidden, .ffn = m.ffn, .blocks = m.layers, .classes = m.classes};
}

// FLOP/s of lab-mlp forward + backward on this process's core: the median of `reps` timed steps
// after one warm-up. The matmul FLOPs are the model's (what the cost model charges).
double measure_step_flops(const strategy::ModelSpec& m, int reps) {
  const auto shape = shape_of(m);
  model::LabMlp net(shape, 1);
  const int64_t b = m.default_microbatch;
  const double flops = double(model::LabMlp::step_matmul_flops(shape, b));
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
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0) times.push_back(s);  // the first step pays page faults
  }
  return flops / median(times);
}

// `k` processes measure at once (forked before this process starts any thread); returns each
// one's FLOP/s. They start together on a pipe byte.
std::vector<double> concurrent_step_flops(const strategy::ModelSpec& m, int k, int reps) {
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
        f = measure_step_flops(m, reps);
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
  const std::string start(size_t(k), 'g');
  if (::write(go[1], start.data(), start.size()) != ssize_t(start.size())) throw RuntimeError("calibrate: start failed");
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

double measure_optimizer_bytes_per_s(const strategy::ModelSpec& m, int reps) {
  const auto shape = shape_of(m);
  model::LabMlp net(shape, 1);
  auto opt = train::make_optimizer(train::AdamWConfig{}, {0, int64_t(net.params().size())});
  std::fill(net.grads().begin(), net.grads().end(), 1e-3f);
  std::vector<double> times;
  for (int i = 0; i <= reps; ++i) {
    const auto t0 = Clock::now();
    opt->step(net.params(), net.grads());
    if (i > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(net.params().size()) * 28.0 / median(times);  // bytes moved per AdamW element
}

double measure_memcpy_bytes_per_s() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> times;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(bytes) / median(times);
}

// Runs `body` on `n` ranks: threads of this process, each with its own Gloo context and sockets
// over loopback, as separate processes would have. The first rank's error is rethrown.
void on_ranks(int n, const std::function<void(comm::Communicator&, int rank)>& body) {
  auto store = comm::make_in_process_store();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = std::chrono::seconds(60);
        auto c = comm::make_gloo_communicator(store, r, n, go);
        body(*c, r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw RuntimeError("calibrate: Gloo measurement failed: " + e);
}

std::vector<comm::CollectiveBenchRow> allreduce_bench(int n, const std::vector<double>& sizes, int iters) {
  std::vector<comm::CollectiveBenchRow> rows;
  on_ranks(n, [&](comm::Communicator& c, int r) {
    auto mine = comm::run_collective_bench(c, strategy::CollectiveOp::kAllReduce, sizes, 2, iters);
    if (r == 0) rows = std::move(mine);
  });
  return rows;
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// CPU time the communication itself costs per byte a rank sends: over loopback TCP the kernel
// copies every byte (several times), on the same cores the ranks compute on. All `n` ranks run
// in this process, so its CPU time covers them all: seconds / (iterations x n x 2(n-1)/n x S).
double measure_comm_cpu_seconds_per_byte(int n, double bytes, int iters) {
  const size_t count = size_t(bytes / 4) / size_t(n) * size_t(n);
  double cpu_before = 0, cpu_after = 0;
  on_ranks(n, [&](comm::Communicator& c, int r) {
    std::vector<float> buf(count, 1.0f);
    c.all_reduce(buf)->wait();  // connect and warm up
    c.barrier()->wait();
    if (r == 0) cpu_before = process_cpu_seconds();
    for (int i = 0; i < iters; ++i) c.all_reduce(buf)->wait();
    c.barrier()->wait();
    if (r == 0) cpu_after = process_cpu_seconds();
  });
  const double sent = double(iters) * n * 2.0 * (n - 1) / n * double(count) * 4;
  return (cpu_after - cpu_before) / sent;
}

// Least squares for t = x a + y / B with weights 1/t (relative error): returns {a, 1/B}.
std::pair<double, double> fit_alpha_beta(const std::vector<AllReducePoint>& pts) {
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  for (const auto& p : pts) {
    const double w = 1.0 / (p.seconds * p.seconds);
    const double x = 2.0 * (p.ranks - 1);
    const double y = 2.0 * (p.ranks - 1) / p.ranks * p.bytes;
    sxx += w * x * x, sxy += w * x * y, syy += w * y * y, sxt += w * x * p.seconds, syt += w * y * p.seconds;
  }
  const double det = sxx * syy - sxy * sxy;
  if (!(std::fabs(det) > 0)) throw RuntimeError("calibrate: all-reduce fit is singular");
  double a = (sxt * syy - syt * sxy) / det, beta = (sxx * syt - sxy * sxt) / det;
  if (a < 0) {  // no measurable latency: fit the bandwidth alone
    a = 0;
    beta = syt / syy;
  }
  return {a, beta};
}

void say(const CalibrationOptions& o, const std::string& s) {
  if (o.progress) o.progress(s);
}

}  // namespace

nlohmann::json Calibration::to_json() const {
  nlohmann::json conc = nlohmann::json::array(), ar = nlohmann::json::array();
  for (const auto& c : concurrency)
    conc.push_back({{"processes", c.processes}, {"flops_per_s_each", c.flops_per_s_each},
                    {"aggregate_flops_per_s", c.aggregate_flops_per_s}, {"predicted_aggregate", c.predicted_aggregate}});
  for (const auto& a : allreduce)
    ar.push_back({{"ranks", a.ranks}, {"bytes", a.bytes}, {"seconds", a.seconds}, {"fitted_seconds", a.fitted_seconds}});
  return {{"machine", machine}, {"created_at", created_at}, {"hardware_threads", hardware_threads},
          {"flops_per_s", flops_per_s}, {"concurrency", conc}, {"optimizer_bytes_per_s", optimizer_bytes_per_s},
          {"memcpy_bytes_per_s", memcpy_bytes_per_s}, {"allreduce", ar}, {"latency_seconds", latency_seconds},
          {"link_bytes_per_s", link_bytes_per_s}, {"fit_max_relative_error", fit_max_relative_error},
          {"comm_cpu_seconds_per_byte", comm_cpu_seconds_per_byte},
          {"cluster", strategy::to_json(cluster)}};
}

Calibration calibrate(const CalibrationOptions& o) {
  if (o.nproc < 1 || o.nproc > 64)
    throw ConfigError("--nproc", std::to_string(o.nproc), "must be between 1 and 64");
  const strategy::ModelSpec m = strategy::load_model(o.model);
  if (m.kind != strategy::ModelKind::kMlp) throw ConfigError("--model", o.model, "calibration runs the lab MLP");
  Calibration c;
  c.machine = host_name();
  c.created_at = now_utc();
  c.hardware_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const int reps = o.quick ? 1 : 3;

  // Compute, 1..N processes at once (forked before any thread of ours exists).
  say(o, "compute: lab-mlp forward+backward, 1 process");
  for (int k = 1; k <= o.nproc; ++k) {
    if (k > 1) say(o, "compute: " + std::to_string(k) + " processes at once");
    const auto each = concurrent_step_flops(m, k, reps);
    ConcurrencyPoint p;
    p.processes = k;
    p.flops_per_s_each = median(each);
    for (double f : each) p.aggregate_flops_per_s += f;
    c.concurrency.push_back(p);
  }
  c.flops_per_s = c.concurrency.front().flops_per_s_each;
  const int cores = std::min(c.hardware_threads, o.nproc);
  for (auto& p : c.concurrency) p.predicted_aggregate = c.flops_per_s * std::min(p.processes, cores);

  say(o, "memory: AdamW update and memcpy");
  c.optimizer_bytes_per_s = measure_optimizer_bytes_per_s(m, reps);
  c.memcpy_bytes_per_s = measure_memcpy_bytes_per_s();

  // Collectives, 2..N ranks.
  std::vector<double> sizes = o.quick ? std::vector<double>{16e3, 1e6, 16e6} : std::vector<double>{4e3, 64e3, 1e6, 16e6, 64e6};
  for (int n = 2; n <= std::max(2, o.nproc); ++n) {
    say(o, "communication: Gloo all-reduce on loopback, " + std::to_string(n) + " ranks");
    for (const auto& row : allreduce_bench(n, sizes, o.quick ? 3 : 5))
      c.allreduce.push_back({n, row.bytes, row.seconds, 0});
  }
  say(o, "communication: CPU time per byte of Gloo traffic");
  c.comm_cpu_seconds_per_byte = measure_comm_cpu_seconds_per_byte(2, o.quick ? 4e6 : 64e6, o.quick ? 2 : 4);
  const auto [a, beta] = fit_alpha_beta(c.allreduce);
  c.latency_seconds = a;
  c.link_bytes_per_s = 1.0 / beta;
  for (auto& p : c.allreduce) {
    p.fitted_seconds = 2.0 * (p.ranks - 1) * a + 2.0 * (p.ranks - 1) / p.ranks * p.bytes * beta;
    c.fit_max_relative_error = std::max(c.fit_max_relative_error, std::fabs(p.fitted_seconds / p.seconds - 1));
  }

  // The calibrated cluster: the preset's shape with measured figures. One "device" is one worker
  // process; cores_per_node is what the workers really share.
  strategy::ClusterSpec cl = strategy::parse_cluster_toml(std::string(*strategy::embedded_preset("clusters", "cpu-local")), "cpu-local");
  cl.description = "calibrated on " + c.machine + " at " + c.created_at;
  cl.cores_per_node = cores;
  cl.device.peak_flops_fp32 = c.flops_per_s;
  cl.device.peak_flops_bf16 = c.flops_per_s;
  cl.device.gemm_efficiency = 1.0;
  cl.device.memory_bytes_per_s = c.optimizer_bytes_per_s;
  cl.intra.kind = "loopback";
  cl.intra.bytes_per_s = c.link_bytes_per_s;
  cl.intra.latency_seconds = c.latency_seconds;
  cl.inter = cl.intra;
  cl.comm_cpu_seconds_per_byte = c.comm_cpu_seconds_per_byte;
  cl.calibrated = true;
  c.cluster = cl;
  return c;
}

fs::path write_calibrated_cluster(const Calibration& c, const fs::path& results_dir) {
  const fs::path dir = results_dir / "clusters";
  fs::create_directories(dir);
  const fs::path path = dir / "cpu-local.toml";
  const fs::path tmp = dir / ("cpu-local.toml.tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp);
    char line[512];
    std::snprintf(line, sizeof line,
                  "cpu-local, calibrated by `parlab calibrate` on %s at %s.\n"
                  "One device = one worker process; %d cores shared (cores_per_node).\n"
                  "Compute: lab-mlp forward+backward at %.1f GFLOP/s per process alone.\n"
                  "Memory: the AdamW update moves %.2f GB/s (memcpy: %.2f GB/s).\n"
                  "Links: Gloo ring all-reduce on loopback fitted to a = %.1f us per step, B = %.2f GB/s\n"
                  "(largest relative error of the fit %.0f%%); %.2f ns of CPU per byte sent.",
                  c.machine.c_str(), c.created_at.c_str(), c.cluster.cores_per_node, c.flops_per_s / 1e9,
                  c.optimizer_bytes_per_s / 1e9, c.memcpy_bytes_per_s / 1e9, c.latency_seconds * 1e6,
                  c.link_bytes_per_s / 1e9, 100 * c.fit_max_relative_error, c.comm_cpu_seconds_per_byte * 1e9);
    std::string text = strategy::cluster_to_toml(c.cluster, line);
    // Where and when, as top-level keys (before the first table).
    const size_t tables = text.find("\n[device]");
    text.insert(tables + 1, "machine = \"" + c.machine + "\"\ncalibrated_at = \"" + c.created_at + "\"\n");
    out << text;
    if (!out) throw RuntimeError("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
  return path;
}

bool calibrated_here(const fs::path& results_dir) {
  const fs::path path = results_dir / "clusters" / "cpu-local.toml";
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const toml::table t = strategy::parse_toml(text.str(), path.string());
    return t["calibrated"].value_or(false) && t["machine"].value_or(std::string()) == host_name();
  } catch (const Error&) {
    return false;  // unreadable: calibrate again
  }
}

}  // namespace parlab::experiments
