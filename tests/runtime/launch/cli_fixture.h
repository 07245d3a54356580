#pragma once
// Driving the real `parlab` binary (PARLAB_BIN, set by CTest; else the path compiled in) from a
// test: a private directory with a tiny model file, a runner that captures the output, the step
// records a worker wrote, and a check for processes left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/launch/process.h"
#include "runtime/launch/worker.h"
#include "runtime/train/trainer_checkpoint.h"
#include "runtime/train/telemetry.h"

namespace parlab::launch {

namespace fs = std::filesystem;

// h 32, f 64, 2 blocks, 4 classes: 8.5 K parameters, milliseconds per step.
constexpr const char* kTinyToml =
    "name = \"tiny\"\nkind = \"mlp\"\nlayers = 2\nhidden = 32\nffn = 64\nclasses = 4\n"
    "microbatch = 4\nprecision = \"fp32\"\n";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("PARLAB_BIN");
#ifdef PARLAB_BIN_DEFAULT
    if (!bin || !*bin) bin = PARLAB_BIN_DEFAULT;
#endif
    if (!bin || !*bin) GTEST_SKIP() << "PARLAB_BIN is not set and no parlab target was built";
    bin_ = bin;
    dir_ = fs::temp_directory_path() / ("parlab_cli_train_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tiny.toml") << kTinyToml;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs parlab with `args`; returns its exit status, its output (stdout and stderr) in `out`.
  ExitStatus parlab(std::vector<std::string> args, std::string& out) {
    args.insert(args.begin(), bin_);
    const fs::path log = dir_ / "cli.log";
    fs::remove(log);
    ChildProcess p(args, {}, log);
    const auto status = p.wait_for(std::chrono::seconds(90));
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return status ? *status : p.terminate(std::chrono::milliseconds(0));
  }

  // The final-state hash a run under dir_ wrote (parameters and optimizer state), or a text
  // that cannot equal one when the run wrote none.
  std::string final_hash(const std::string& run) const {
    std::ifstream in(final_state_path(dir_ / run));
    if (!in) return "(no final state in " + run + ")";
    return train::StateFingerprint::from_json(nlohmann::json::parse(in)).combined_hex();
  }

  // Trains `plan` on `nproc` workers for `steps` steps into `run`, checkpointing at the last step.
  ExitStatus checkpointed_run(int nproc, const std::string& model, const std::string& plan, int64_t steps,
                              const fs::path& run, std::string& out) {
    return parlab({"train", "--nproc", std::to_string(nproc), "--model", model, "--plan", plan, "--steps",
                   std::to_string(steps), "--checkpoint-every", std::to_string(steps), "--run-dir", run.string()},
                  out);
  }

  // Copies the run directory `run` to dir_/`name` without its final state and trains it again
  // for `steps` steps on `nproc` workers with `plan`: a resume under another split. Since the run
  // already reached `steps`, the final state reported is the resumed one, no step taken.
  ExitStatus resume_copy(const fs::path& run, const std::string& name, int nproc, const std::string& model,
                         const std::string& plan, int64_t steps, std::string& out) {
    const fs::path copy = dir_ / name;
    fs::copy(run, copy, fs::copy_options::recursive);
    fs::remove(final_state_path(copy));
    return parlab({"train", "--nproc", std::to_string(nproc), "--model", model, "--plan", plan, "--steps",
                   std::to_string(steps), "--checkpoint-every", "0", "--run-dir", copy.string()},
                  out);
  }

  // `parlab proof kill-resume` of `plan` on `nproc` workers: 8 steps, 2 trials, a checkpoint every
  // 3 steps, in dir_/proof.
  ExitStatus kill_resume_proof(int nproc, const std::string& model, const std::string& plan, std::string& out) {
    return parlab({"proof",
                   "kill-resume",
                   "--nproc",
                   std::to_string(nproc),
                   "--model",
                   model,
                   "--plan",
                   plan,
                   "--steps",
                   "8",
                   "--trials",
                   "2",
                   "--checkpoint-every",
                   "3",
                   "--work-dir",
                   (dir_ / "proof").string(),
                   "--fault-seed",
                   "3",
                   "--timeout",
                   "20"},
                  out);
  }

  // Processes still alive whose command line mentions our run directory.
  std::vector<std::string> survivors() const {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(e.path() / "cmdline");
      std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (char& c : cmd)
        if (c == '\0') c = ' ';
      if (cmd.find(dir_.string()) != std::string::npos) found.push_back(name + ": " + cmd);
    }
    return found;
  }

  std::string bin_;
  fs::path dir_;
};

// The step records of a rank's file, and how many {"type": "error"} lines it holds.
inline std::vector<train::StepRecord> read_records(const fs::path& file, int* errors = nullptr) {
  std::vector<train::StepRecord> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("type") == "step")
      out.push_back(train::step_record_from_json(j));
    else if (errors && j.at("type") == "error")
      ++*errors;
  }
  return out;
}

}  // namespace parlab::launch
