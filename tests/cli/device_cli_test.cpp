// `parlab train --device`: listed by --help; on a machine without a usable GPU (or in a build
// without CUDA, or without its plugin) `--device cuda` fails at once -- exit 2, one line that says
// which it is, no worker started, no hang; and neither the binary nor a CPU run's processes map
// CUDA, cuBLAS or NCCL (the GPU backend is a plugin loaded for --device cuda only).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "parlab/source_dir.h"
#include "runtime/device/device.h"
#include "base/errors.h"
#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

namespace fs = std::filesystem;

ProcessResult parlab(std::vector<std::string> args) {
  args.insert(args.begin(), parlab_bin());
  return run_process(args);
}

std::string ldd_of(const std::string& binary) {
  std::string out;
  FILE* p = ::popen(("ldd '" + binary + "' 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(DeviceCli, TrainHelpListsTheDeviceFlagAndItsChoices) {
  const ProcessResult r = parlab({"train", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("--device");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("cpu"), std::string::npos) << line;
  EXPECT_NE(line.find("cuda"), std::string::npos) << line;
}

TEST(DeviceCli, AnUnknownDeviceIsOneLineNamingTheFlag) {
  const ProcessResult r = parlab({"train", "--device", "tpu", "--steps", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--device = tpu"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cpu, cuda"), std::string::npos) << r.err;
}

TEST(DeviceCli, CudaWithoutADeviceFailsAtOnceWithOneLineAndStartsNoWorker) {
  const std::string why = device::unavailable_reason(device::Kind::kCuda);
  if (why.empty()) GTEST_SKIP() << "this machine has a CUDA device: --device cuda runs here";
  const fs::path run_dir = fs::temp_directory_path() / ("parlab_device_cli_" + std::to_string(::getpid()));
  fs::remove_all(run_dir);
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult r =
      parlab({"train", "--device", "cuda", "--nproc", "2", "--steps", "2", "--run-dir", run_dir.string()});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--device = cuda"), std::string::npos) << r.err;
  if (device::cuda_built()) {
    EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
  } else {
    EXPECT_NE(r.err.find("built without the GPU backend"), std::string::npos) << r.err;
  }
  // Refused before any process: no worker wrote records (a rendezvous would have taken seconds).
  EXPECT_FALSE(fs::exists(run_dir / "rank-0.jsonl"));
  EXPECT_LT(seconds, 20.0);
  fs::remove_all(run_dir);
}

TEST(DeviceCli, TheKillResumeProofOnCudaIsRefusedTheSameWayWithoutADevice) {
  if (device::unavailable_reason(device::Kind::kCuda).empty()) GTEST_SKIP() << "this machine has a CUDA device";
  const fs::path work = fs::temp_directory_path() / ("parlab_device_proof_" + std::to_string(::getpid()));
  const ProcessResult r =
      parlab({"proof", "kill-resume", "--device", "cuda", "--nproc", "1", "--steps", "4", "--work-dir", work.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--device = cuda"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work / "reference")) << "a run started";
  fs::remove_all(work);
}

// The GPU backend is a plugin loaded only for --device cuda (runtime/device/backend.h): nothing
// the binary needs at start (its ELF NEEDED, transitively: ldd) is a CUDA library.
const char* const kCudaLibraries[] = {"libcuda.so", "libcudart", "libcublas", "libnccl", "libparlab_cuda"};

TEST(DeviceCli, TheBinaryNeedsNoCudaLibraryToStart) {
  const std::string libs = ldd_of(parlab_bin());
  ASSERT_NE(libs.find("libc.so"), std::string::npos) << "ldd did not run: " << libs;
  for (const char* lib : kCudaLibraries) EXPECT_EQ(libs.find(lib), std::string::npos) << lib << " in:\n" << libs;
}

// Every library each process of a run mapped, dlopen included: the dynamic loader's own log
// (LD_DEBUG=files, one file per process, inherited by the workers the supervisor spawns).
std::vector<std::string> libraries_mapped_by_run(const std::vector<std::string>& args, const fs::path& dir,
                                                 const std::vector<std::string>& extra_env = {}) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> env = {"LD_DEBUG=files", "LD_DEBUG_OUTPUT=" + (dir / "ld").string()};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), parlab_bin());
  run_process(argv, env);
  std::vector<std::string> logs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("ld.", 0) != 0) continue;
    std::ifstream in(e.path());
    logs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return logs;
}

TEST(DeviceCli, ACpuRunAndItsWorkersMapNoCudaLibrary) {
  const fs::path dir = fs::temp_directory_path() / ("parlab_device_maps_" + std::to_string(::getpid()));
  const std::string small = std::string(PARLAB_SOURCE_DIR) + "/experiments/models/lab-mlp-small.toml";
  const std::vector<std::string> logs =
      libraries_mapped_by_run({"train", "--device", "cpu", "--nproc", "2", "--steps", "1", "--model", small,
                               "--run-dir", (dir / "run").string()},
                              dir);
  // The command and its two workers (at least), each of whose logs saw the C library loaded.
  ASSERT_GE(logs.size(), 3u);
  int workers = 0;
  for (const std::string& log : logs) {
    ASSERT_NE(log.find("libc.so"), std::string::npos) << log.substr(0, 400);
    for (const char* lib : kCudaLibraries) EXPECT_EQ(log.find(lib), std::string::npos) << lib;
    // The workers are parlab-worker, which starts without the simulator (SimGrid and ns-3).
    if (log.find("initialize program: ") != std::string::npos && log.find("/parlab-worker") != std::string::npos) {
      ++workers;
      EXPECT_EQ(log.find("libsimgrid"), std::string::npos) << "a worker loaded the simulator";
    }
  }
  EXPECT_EQ(workers, 2) << "the supervisor did not start parlab-worker";
  // The log does see a dlopen: asking for cuda maps the plugin and cuBLAS (then says no device).
  if (device::cuda_built() && !device::unavailable_reason(device::Kind::kCuda).empty()) {
    const std::vector<std::string> cuda = libraries_mapped_by_run(
        {"train", "--device", "cuda", "--nproc", "1", "--steps", "1", "--run-dir", (dir / "run").string()}, dir);
    ASSERT_FALSE(cuda.empty());
    EXPECT_NE(cuda[0].find("libparlab_cuda.so"), std::string::npos);
    EXPECT_NE(cuda[0].find("libcublas"), std::string::npos);
  }
  fs::remove_all(dir);
}

// parlab-worker (the program `parlab train` starts as its workers) loads the GPU plugin as a cuda
// worker does: the plugin resolves against what the worker exports, so a symbol it lacks would
// show here as "could not be loaded", not only on a GPU machine.
TEST(DeviceCli, TheWorkerProgramLoadsTheGpuBackendItsCudaWorkersNeed) {
  const fs::path worker = fs::path(parlab_bin()).parent_path() / "parlab-worker";
  ASSERT_TRUE(fs::exists(worker)) << worker;
  const ProcessResult r = run_process({worker.string(), "--check-cuda"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!device::cuda_built()) {
    EXPECT_NE(r.out.find("built without the GPU backend"), std::string::npos) << r.out;
  } else if (device::unavailable_reason(device::Kind::kCuda).empty()) {
    EXPECT_NE(r.out.find("cuda: available"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("no CUDA device"), std::string::npos) << r.out;
  }
}

// A build with the GPU backend whose plugin is missing, or is not a plugin: --device cuda says
// so in one line, exit 2, before any worker.
TEST(DeviceCli, CudaWithoutItsPluginFailsWithOneLineNamingThePlugin) {
  if (!device::cuda_built()) GTEST_SKIP() << "built without the GPU backend: no plugin to miss";
  const fs::path dir = fs::temp_directory_path() / ("parlab_device_plugin_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path not_elf = dir / "libparlab_cuda.so";
  std::ofstream(not_elf) << "not a shared library\n";
  struct Case {
    fs::path plugin;
    const char* want;
  };
  for (const Case& c :
       {Case{dir / "missing" / "libparlab_cuda.so", "was not found"}, Case{not_elf, "could not be loaded"}}) {
    SCOPED_TRACE(c.plugin.string());
    std::vector<std::string> argv = {parlab_bin(), "train",   "--device", "cuda",      "--nproc",
                                     "1",          "--steps", "1",        "--run-dir", (dir / "run").string()};
    const ProcessResult r = run_process(argv, {"PARLAB_CUDA_PLUGIN=" + c.plugin.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--device = cuda"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("libparlab_cuda.so"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "run" / "rank-0.jsonl")) << "a worker ran";
  }
  fs::remove_all(dir);
}

// What the GPU runtime trains, decided before any process: every split the CPU runtime trains
// (DDP, ZeRO-1/2/3, tensor parallelism with sp on or off and with ZeRO-1/2, GPipe, 1F1B and
// interleaved pipelines); its own one refusal, ZeRO-2/3 with SGD, is one ConfigError naming the
// plan key and its value, and the CPU takes that plan.
TEST(DevicePlanCheck, CudaTakesEverySplitTheCpuTrainsAndNamesTheKeyOfWhatItRefuses) {
  auto plan = [](int dp, int tp, int pp, int zero) {
    strategy::Plan p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    p.zero = zero;
    return p;
  };
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(2, 1, 1, 0)));
  for (int zero = 1; zero <= 3; ++zero) EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(2, 1, 1, zero)));
  strategy::Plan sgd1 = plan(2, 1, 1, 1), sgd2 = plan(2, 1, 1, 2), sgd_alone = plan(1, 1, 1, 3);
  sgd1.optimizer = sgd2.optimizer = sgd_alone.optimizer = strategy::OptimizerKind::kSgd;
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, sgd1));       // updates on host copies
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, sgd_alone));  // a world of one has no shards
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(1, 2, 1, 0)));
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(1, 1, 2, 0)));
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(2, 2, 2, 1)));
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, plan(2, 2, 1, 2)));  // ZeRO-2 of TP slices
  strategy::Plan gpipe = plan(1, 1, 2, 0), interleaved = plan(1, 1, 2, 0), tp_sp = plan(1, 2, 1, 0);
  gpipe.schedule = strategy::Schedule::kGPipe;
  interleaved.schedule = strategy::Schedule::kInterleaved;
  tp_sp.sequence_parallel = true;
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, gpipe));
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, interleaved));
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCuda, tp_sp));
  try {
    device::check_plan(device::Kind::kCuda, sgd2);
    ADD_FAILURE() << "ZeRO-2 with SGD was accepted on cuda";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("plan.optimizer = sgd"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(device::check_plan(device::Kind::kCpu, sgd2));
}

// Through the binary: a plan the GPU runtime takes gets past the plan check and stops at the
// device (no CUDA device, or no GPU backend), one line, exit 2, nothing spawned; a plan it
// refuses is named by its key on any machine, before the device is even looked at.
TEST(DeviceCli, CudaPlansArePassedOrRefusedByKeyBeforeTheDeviceCheck) {
  if (device::unavailable_reason(device::Kind::kCuda).empty()) GTEST_SKIP() << "this machine has a CUDA device";
  const fs::path run_dir = fs::temp_directory_path() / ("parlab_device_plan_" + std::to_string(::getpid()));
  struct Case {
    const char* plan;
    const char* want;  // in the one line
  };
  const std::string device_line = device::cuda_built() ? "no CUDA device" : "built without the GPU backend";
  for (const Case& c : {Case{"zero=0", ""}, Case{"zero=1", ""}, Case{"zero=2", ""}, Case{"zero=3", ""},
                        Case{"zero=2,optimizer=sgd", "plan.optimizer = sgd"}, Case{"tp=2", ""}, Case{"pp=2", ""},
                        Case{"tp=2,sp=on", ""}, Case{"pp=2,schedule=gpipe", ""}, Case{"pp=2,schedule=interleaved", ""},
                        Case{"tp=2,precision=mixed", ""}}) {
    SCOPED_TRACE(c.plan);
    fs::remove_all(run_dir);
    const ProcessResult r = parlab(
        {"train", "--device", "cuda", "--nproc", "2", "--steps", "1", "--plan", c.plan, "--run-dir", run_dir.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(*c.want ? std::string(c.want) : device_line), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(run_dir / "rank-0.jsonl")) << "a worker ran";
  }
  fs::remove_all(run_dir);
}

}  // namespace
}  // namespace parlab::testing
