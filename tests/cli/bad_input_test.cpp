// Bad input at the edge, through the real binary: every value below must be refused before any
// work starts with exit 2 and ONE line on stderr that names the flag or key, and never by a
// signal. The first test holds the cases found by hand; the second sweeps every numeric flag of
// every subcommand with values no flag accepts; the third covers results databases that cannot
// be used.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <random>

#include "tests/support/scratch_dir.h"
#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTinyToml =
    "name = \"tiny\"\nkind = \"mlp\"\nlayers = 2\nhidden = 32\nffn = 64\nclasses = 4\nmicrobatch = 4\n"
    "precision = \"fp32\"\n";

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    tiny_ = (dir_.path() / "tiny.toml").string();
    std::ofstream(tiny_) << kTinyToml;
    run_dir_ = (dir_.path() / "run").string();
  }
  // Runs parlab and checks the contract; `mention` must appear in the one line.
  void expect_refused(std::vector<std::string> args, const std::string& mention) {
    const std::string shown = join(args);
    args.insert(args.begin(), parlab_bin());
    const ProcessResult r = run_process(args);
    ASSERT_EQ(r.signal, 0) << shown << " died of signal " << r.signal << "\n" << r.err;
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << shown << ": should mention '" << mention << "'\n" << r.err;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
    return s;
  }
  std::vector<std::string> train(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"train", "--nproc", "2", "--model", tiny_, "--steps", "2", "--run-dir", run_dir_};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  ScratchDir dir_;
  std::string tiny_, run_dir_;
};

TEST_F(BadInput, EachCaseFoundByHandIsRefusedNamingFlagAndValue) {
  const std::string wide = (dir_.path() / "wide.toml").string();
  std::ofstream(wide) << "name = \"wide\"\nkind = \"mlp\"\nlayers = 2\nhidden = 65536\nffn = 65536\nclasses = 4\n"
                         "precision = \"fp32\"\n";
  const std::string cluster_inf = (dir_.path() / "inf.toml").string();
  std::ofstream(cluster_inf)
      << "name = \"c\"\n[device]\nmemory_gb = 8\npeak_tflops_fp32 = inf\npeak_tflops_bf16 = 1\n"
         "memory_bandwidth_gb_per_s = 1\n[intra]\nbandwidth_gb_per_s = 1\n[inter]\nbandwidth_gb_per_s = 1\n";
  const std::string devise = (dir_.path() / "devise.toml").string();
  std::ofstream(devise)
      << "name = \"c\"\n[devise]\nmemory_gb = 8\n[intra]\nbandwidth_gb_per_s = 1\n[inter]\nbandwidth_gb_per_s = 1\n";
  const std::string huge = (dir_.path() / "huge.toml").string();
  std::ofstream(huge) << "kind = \"mlp\"\nlayers = 2\nhidden = 9223372036854775807\nffn = 8\nclasses = 4\n";
  const std::string ledger = (dir_.path() / "ledger.toml").string();
  std::ofstream(ledger) << "kind = \"ledger\"\n[ledger]\nparams_gb = 1e308\ngrads_gb = 1\noptimizer_gb = 1\n"
                           "activations_gb = 1\nlargest_layer_gb = 1\ndevice_gb = 80\n";
  // A run directory whose records file holds bytes, not JSON lines.
  const std::string garbled_records = (dir_.path() / "garbled").string();
  fs::create_directories(garbled_records);
  std::ofstream(garbled_records + "/rank-0.jsonl", std::ios::binary) << std::string("\xff\xfe{\"type\":\"st\n", 16);
  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {train({"--lr", "-1"}), "--lr = -1"},
      {train({"--lr", "nan"}), "--lr = nan"},
      {train({"--lr", "inf"}), "--lr = inf"},
      {train({"--momentum", "nan"}), "--momentum = nan"},
      {train({"--weight-decay", "-1"}), "--weight-decay = -1"},
      {train({"--data-size", "7"}), "--data-size = 7"},
      {train({"--seed", "-1"}), "--seed = -1"},
      {train({"--min-nproc", "0"}), "--min-nproc = 0"},
      {train({"--mtbf-hours", "0"}), "--mtbf-hours = 0"},
      {train({"--mtbf-hours", "nan"}), "--mtbf-hours = nan"},
      {train({"--timeout", "nan"}), "--timeout = nan"},
      {train({"--timeout", "inf"}), "--timeout = inf"},
      {{"train", "--nproc", "2", "--model", tiny_, "--run-dir", ""}, "--run-dir"},
      {{"train", "--nproc", "2", "--model", tiny_, "--run-dir", "/proc/parlab-cannot-be-here"}, "--run-dir = /proc/"},
      {{"train", "--nproc", "2", "--model", wide, "--run-dir", run_dir_}, "the memory ledger says stage 0 needs"},
      {train({"--db", "/nonexistent-parlab-dir/x.db"}), "--db = /nonexistent-parlab-dir/x.db"},
      {{"scaling", "--workers", "99999999999"}, "--workers = 99999999999"},
      {{"plan", "--ledger-gb", "params=28,grads=28,optimizer=56,activations=18,largest-layer=6", "--device-gb", "inf"},
       "--device-gb = inf"},
      {{"plan", "--model", "lab-mlp", "--plan", "dp=1,dp=2"}, "plan.dp = 1, then 2"},
      {{"plan", "--model", "lab-mlp", "--plan", "dp=2,,tp=1"}, "plan = dp=2,,tp=1"},
      {{"plan", "--params", "inf"}, "--params = inf"},
      {{"plan", "--params", "nan"}, "--params = nan"},
      {{"plan", "--params", "0"}, "--params = 0"},
      {{"plan", "--model", dir_.path().string()}, "is a directory"},
      {{"plan", "--model", "lab-mlp", "--program", "-1"}, "--program = -1"},
      {{"plan", "--model", huge}, "hidden = 9223372036854775807"},
      {{"plan", "--model", "lab-mlp", "--cluster", cluster_inf}, "device.peak_tflops_fp32 = inf"},
      {{"plan", "--model", "lab-mlp", "--cluster", devise}, "[devise]"},
      {{"experiment", "run", ledger, "--db", (dir_.path() / "x.db").string()}, "ledger.params_gb = 1e+308"},
      {{"bench", "collective", "--iters", "0"}, "--iters = 0"},
      {{"bench", "collective", "--nproc", "2000"}, "--nproc = 2000"},
      {{"analyze", "stragglers", "--window", "0", dir_.path().string()}, "--window = 0"},
      {{"simulate", "collective", "--bytes", "99999999999999999999G"}, "--bytes = 99999999999999999999G"},
      {{"experiment", "list", "--db", ""}, "--db"},
      {{"nosuchcmd"}, "nosuchcmd: no such command"},
      {{"plan", "--model", "lab-mlp", "--gbs", "0"}, "--gbs = 0"},
      {{"analyze", "stragglers", garbled_records}, garbled_records + "/rank-0.jsonl is not JSON lines"},
      {{}, "a subcommand is required"},
  };
  for (const Case& c : cases) expect_refused(c.args, c.mention);
  EXPECT_FALSE(fs::exists("/nonexistent-parlab-dir")) << "--db created a directory";
  EXPECT_FALSE(fs::exists(run_dir_)) << "a refused train left its run directory";
}

// Every numeric flag of every subcommand, with values that no flag accepts: not a number, not
// finite, negative, past 64 bits. A value that slipped through would start the command (and the
// test would see exit 0 or a crash).
TEST_F(BadInput, FuzzEveryNumericFlagOfEverySubcommand) {
  struct Command {
    std::vector<std::string> prefix;  // enough for the command to be otherwise valid
    std::vector<std::string> flags;
  };
  const std::vector<Command> commands = {
      {train({}),
       {"--nproc", "--steps", "--seed", "--data-size", "--lr", "--momentum", "--weight-decay", "--checkpoint-every",
        "--keep-last", "--max-restarts", "--min-nproc", "--mtbf-hours", "--timeout", "--heartbeat-timeout",
        "--max-same-failure"}},
      {{"plan", "--model", "lab-mlp"}, {"--world", "--gbs", "--top", "--program", "--simulate"}},
      {{"plan"}, {"--params"}},
      {{"plan", "--ledger-gb", "params=1,grads=1,optimizer=1,activations=1,largest-layer=1"}, {"--device-gb"}},
      {{"simulate", "--model", "lab-mlp", "--cluster", "dgx-a100", "--world", "8"}, {"--steps", "--warmup"}},
      {{"simulate", "collective"}, {"--ranks", "--bytes"}},
      {{"scaling"}, {"--compute-ms", "--overhead-ms", "--bytes", "--link", "--latency-us", "--straggler", "--workers"}},
      {{"bench", "collective", "--bytes", "4K"}, {"--nproc", "--iters", "--warmup", "--timeout", "--bytes"}},
      {{"analyze", "stragglers", dir_.path().string()}, {"--window"}},
      {{"proof", "kill-resume", "--model", tiny_, "--work-dir", run_dir_},
       {"--nproc", "--steps", "--trials", "--checkpoint-every", "--seed", "--fault-seed", "--data-size", "--tolerance",
        "--timeout"}},
  };
  const std::vector<std::string> values = {"nan", "-1", "-inf", "1e999", "99999999999999999999", "12abc"};
  int runs = 0;
  for (const Command& c : commands) {
    for (const std::string& flag : c.flags) {
      for (const std::string& v : values) {
        std::vector<std::string> args = c.prefix;
        args.push_back(flag);
        args.push_back(v);
        expect_refused(args, flag);
        ++runs;
      }
    }
  }
  EXPECT_GE(runs, 280);  // 48 flags x 6 values
  EXPECT_FALSE(fs::exists(run_dir_)) << "a refused command left its run directory";
}

TEST_F(BadInput, ResultsDatabasesThatCannotBeUsedAreNamedWithTheReason) {
  const fs::path good = dir_.path() / "good.db";
  ProcessResult r = run_process({parlab_bin(), "experiment", "run", "seed_budget", "--db", good.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;

  std::string bytes(4096, '\0');
  std::mt19937 gen(3);
  for (char& c : bytes) c = static_cast<char>(gen());
  const fs::path random = dir_.path() / "random.db";
  std::ofstream(random, std::ios::binary) << bytes;
  std::ifstream in(good, std::ios::binary);
  std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path truncated = dir_.path() / "truncated.db";
  std::ofstream(truncated, std::ios::binary) << whole.substr(0, whole.size() / 3);

  for (const char* cmd : {"list", "run"}) {
    std::vector<std::string> args = {"experiment", cmd};
    if (std::string(cmd) == "run") args.push_back("seed_budget");
    for (const auto& [db, why] :
         {std::pair{random, "not a SQLite database"}, std::pair{truncated, "damaged or truncated"}}) {
      std::vector<std::string> a = args;
      a.insert(a.end(), {"--db", db.string()});
      expect_refused(a, "--db = " + db.string() + ": ");
      expect_refused(a, why);
    }
  }
  expect_refused({"compare", "--db", random.string()}, "--db = " + random.string());
  expect_refused({"calibrate", "--db", random.string()}, "--db = " + random.string());  // before measuring

  // Read-only: readers still read, writers are refused. Root ignores file modes, so the file sits
  // on a read-only bind mount (which needs root); without it the mode bits serve.
  const fs::path ro_src = dir_.path() / "ro-src", ro = dir_.path() / "ro";
  fs::create_directories(ro_src);
  fs::create_directories(ro);
  fs::copy_file(good, ro_src / "good.db");
  bool mounted = false;
  if (::geteuid() == 0) {
    mounted = ::mount(ro_src.c_str(), ro.c_str(), nullptr, MS_BIND, nullptr) == 0 &&
              ::mount(nullptr, ro.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) == 0;
    if (!mounted) GTEST_SKIP() << "root, but a read-only bind mount failed: " << std::strerror(errno);
  } else {
    fs::permissions(ro_src / "good.db", fs::perms::owner_read);
    fs::permissions(ro_src, fs::perms::owner_read | fs::perms::owner_exec);
    fs::remove(ro);
    fs::create_directory_symlink(ro_src, ro);
  }
  const std::string ro_db = (ro / "good.db").string();
  r = run_process({parlab_bin(), "experiment", "list", "--db", ro_db});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("seed_budget"), std::string::npos) << r.out;
  r = run_process({parlab_bin(), "compare", "--db", ro_db, "--experiment", "seed_budget"});
  EXPECT_EQ(r.err.find("read-only"), std::string::npos) << r.err;  // may have nothing to compare, but reads
  expect_refused({"experiment", "run", "seed_budget", "--db", ro_db}, "--db = " + ro_db + ": is read-only");
  if (mounted)
    ::umount2(ro.c_str(), MNT_DETACH);
  else
    fs::permissions(ro_src, fs::perms::owner_all);
}

}  // namespace
}  // namespace parlab::testing
