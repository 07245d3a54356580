// The supervisor with stand-in workers (fake_worker): a failing worker stops the others and is
// named with its exit code, stubborn workers are SIGKILLed after the grace period, an interrupt
// stops everyone, and no path leaves a process behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <algorithm>

#include "runtime/launch/progress.h"
#include "runtime/launch/supervisor.h"

namespace parlab::launch {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("parlab_sup_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// `mode`: "", "ignore-term", "hang" or "silent" (fake_worker.cpp).
SupervisorOptions fake_job_mode(const fs::path& dir, int nproc, int failing, int code, int delay_ms,
                                const std::string& mode) {
  SupervisorOptions o;
  o.argv = {PARLAB_FAKE_WORKER, std::to_string(failing), std::to_string(code), std::to_string(delay_ms)};
  if (!mode.empty()) o.argv.push_back(mode);
  o.nproc = nproc;
  o.run_dir = dir;
  o.grace = std::chrono::milliseconds(500);
  o.poll = std::chrono::milliseconds(10);
  return o;
}

SupervisorOptions fake_job(const fs::path& dir, int nproc, int failing, int code, int delay_ms,
                           bool ignore_term = false) {
  return fake_job_mode(dir, nproc, failing, code, delay_ms, ignore_term ? "ignore-term" : "");
}

pid_t pid_file(const fs::path& dir, int rank) {
  std::ifstream in(dir / ("pid-" + std::to_string(rank)));
  pid_t pid = -1;
  in >> pid;
  return pid;
}

void expect_no_survivors(const fs::path& dir, int nproc) {
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = pid_file(dir, r);
    ASSERT_GT(pid, 0) << "rank " << r << " never wrote its pid";
    EXPECT_FALSE(process_exists(pid)) << "rank " << r << " (pid " << pid << ") outlived the supervisor";
  }
}

TEST(SupervisorTest, AFailingWorkerStopsTheOthersAndIsNamed) {
  const fs::path dir = fresh_dir("fail");
  SupervisorOptions o = fake_job(dir, 3, /*failing=*/1, /*code=*/3, /*delay_ms=*/300);
  double loss_sum = 0;
  int records = 0;
  o.on_record = [&](const train::StepRecord& r) {
    loss_sum += r.loss_sum;
    ++records;
  };
  Supervisor s(o);
  const SupervisorResult result = s.run();
  EXPECT_FALSE(result.ok);
  EXPECT_FALSE(result.interrupted);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_NE(result.message.find("rank 1 exited with code 3"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("stopped ranks 0, 2"), std::string::npos) << result.message;
  // The failing rank's own words are quoted from its log.
  EXPECT_NE(result.message.find("fake worker rank 1 failing with code 3"), std::string::npos) << result.message;
  ASSERT_EQ(result.exits.size(), 3u);
  EXPECT_TRUE(result.exits[1].status.exited);
  EXPECT_EQ(result.exits[1].status.code, 3);
  EXPECT_FALSE(result.exits[1].stopped);
  for (int r : {0, 2}) {
    EXPECT_TRUE(result.exits[r].stopped) << r;
    EXPECT_EQ(result.exits[r].status.signal, SIGTERM) << r;
  }
  // Every record reached on_record (losses 1 + 2 + 3), and the run dir keeps what was written.
  EXPECT_EQ(records, 3);
  EXPECT_DOUBLE_EQ(loss_sum, 6.0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(fs::exists(rank_records_path(dir, r)));
    EXPECT_TRUE(fs::exists(rank_log_path(dir, r)));
  }
  expect_no_survivors(dir, 3);
  fs::remove_all(dir);
}

TEST(SupervisorTest, WorkersIgnoringSigtermAreKilledAfterTheGracePeriod) {
  const fs::path dir = fresh_dir("stubborn");
  Supervisor s(fake_job(dir, 2, /*failing=*/0, /*code=*/5, /*delay_ms=*/300, /*ignore_term=*/true));
  const SupervisorResult result = s.run();
  EXPECT_EQ(result.failed_rank, 0);
  EXPECT_NE(result.message.find("rank 0 exited with code 5"), std::string::npos) << result.message;
  EXPECT_EQ(result.exits[1].status.signal, SIGKILL);
  expect_no_survivors(dir, 2);
  fs::remove_all(dir);
}

TEST(SupervisorTest, AllWorkersSucceeding) {
  const fs::path dir = fresh_dir("ok");
  Supervisor s(fake_job(dir, 2, /*failing=*/-1, 0, /*delay_ms=*/50));
  const SupervisorResult result = s.run();
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_EQ(result.failed_rank, -1);
  for (const WorkerExit& e : result.exits) EXPECT_TRUE(e.status.ok());
  fs::remove_all(dir);
}

std::string token_file(const fs::path& dir, int rank) {
  std::ifstream in(dir / ("token-" + std::to_string(rank)));
  std::string token;
  in >> token;
  return token;
}

// Every launch gives its workers one fresh random job token (what a TCP store request must
// carry), without the user setting one: same on every rank, different on the next launch.
TEST(SupervisorTest, EveryLaunchGivesItsWorkersOneFreshToken) {
  const fs::path dir = fresh_dir("token");
  std::vector<std::string> launches;
  for (int launch = 0; launch < 2; ++launch) {
    Supervisor s(fake_job(dir, 3, /*failing=*/-1, 0, /*delay_ms=*/20));
    ASSERT_TRUE(s.run().ok);
    const std::string t0 = token_file(dir, 0);
    EXPECT_EQ(t0.size(), 32u) << t0;
    EXPECT_EQ(t0.find_first_not_of("0123456789abcdef"), std::string::npos) << t0;
    for (int r = 1; r < 3; ++r) EXPECT_EQ(token_file(dir, r), t0) << "rank " << r;
    launches.push_back(t0);
  }
  EXPECT_NE(launches[0], launches[1]);
  fs::remove_all(dir);
}

TEST(SupervisorTest, RequestStopTearsEveryoneDown) {
  const fs::path dir = fresh_dir("stop");
  Supervisor s(fake_job(dir, 2, /*failing=*/0, 0, /*delay_ms=*/60'000));
  s.start();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    s.request_stop();
  });
  const SupervisorResult result = s.wait();
  stopper.join();
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.interrupted);
  EXPECT_EQ(result.failed_rank, -1);
  for (const WorkerExit& e : result.exits) EXPECT_TRUE(e.stopped);
  expect_no_survivors(dir, 2);
  fs::remove_all(dir);
}

TEST(SupervisorTest, DestroyingTheSupervisorKillsItsWorkers) {
  const fs::path dir = fresh_dir("raii");
  std::vector<pid_t> pids;
  {
    Supervisor s(fake_job(dir, 2, /*failing=*/0, 0, /*delay_ms=*/60'000));
    s.start();
    pids = s.pids();
    // Wait until both are up (their pid files exist) so the kill meets running processes.
    for (int i = 0; i < 500 && !(fs::exists(dir / "pid-0") && fs::exists(dir / "pid-1")); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t p : pids) EXPECT_FALSE(process_exists(p)) << p;
  fs::remove_all(dir);
}

TEST(SupervisorTest, AnUnhealthyWorkerFailsTheRunLikeAnExit) {
  // Both workers stay up (a hang); the health hook reports rank 1 once it has been silent for
  // 200 ms, as a heartbeat check would. It must be named as the root cause and everyone stopped.
  const fs::path dir = fresh_dir("unhealthy");
  SupervisorOptions o = fake_job(dir, 2, /*failing=*/0, 0, /*delay_ms=*/60'000);
  std::vector<int> asked;
  o.unhealthy = [&](int rank, double silent_seconds) -> std::string {
    asked.push_back(rank);
    return rank == 1 && silent_seconds > 0.2 ? "no heartbeat for 0.2 s" : "";
  };
  Supervisor s(o);
  const SupervisorResult result = s.run();
  EXPECT_FALSE(result.ok);
  EXPECT_FALSE(result.interrupted);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.exits[1].unhealthy, "no heartbeat for 0.2 s");
  EXPECT_TRUE(result.exits[0].unhealthy.empty());
  EXPECT_EQ(result.message.rfind("rank 1 was unhealthy: no heartbeat for 0.2 s", 0), 0u) << result.message;
  EXPECT_GT(result.detected_seconds, result.started_seconds);
  EXPECT_GE(result.stopped_seconds, result.detected_seconds);
  EXPECT_NE(std::find(asked.begin(), asked.end(), 0), asked.end());  // every running rank is asked
  expect_no_survivors(dir, 2);
  fs::remove_all(dir);
}

TEST(SupervisorTest, ARankThatStopsBeatingIsFailedAsAHang) {
  // Three ranks beat every 50 ms; rank 1 stops after 300 ms and sleeps, alive. With a 500 ms
  // heartbeat timeout the supervisor must name it, as a hang, and stop everyone.
  const fs::path dir = fresh_dir("heartbeat");
  SupervisorOptions o = fake_job_mode(dir, 3, /*failing=*/1, 0, /*delay_ms=*/300, "hang");
  o.heartbeat_timeout = std::chrono::milliseconds(500);
  Supervisor s(o);
  const SupervisorResult result = s.run();
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_TRUE(result.exits[1].silent);
  EXPECT_FALSE(result.exits[0].silent);
  EXPECT_EQ(result.exits[1].unhealthy.rfind("no heartbeat for ", 0), 0u) << result.exits[1].unhealthy;
  EXPECT_NE(result.exits[1].unhealthy.find("(heartbeat timeout 500 ms): it stopped responding"), std::string::npos)
      << result.exits[1].unhealthy;
  EXPECT_TRUE(result.exits[0].unhealthy.empty());
  EXPECT_EQ(result.exits[1].error.value("detector", ""), "heartbeat");
  EXPECT_EQ(result.exits[1].error.value("kind", ""), "hang");
  EXPECT_EQ(result.message.rfind("rank 1 was unhealthy: no heartbeat for", 0), 0u) << result.message;
  // Not before its last beat (at least 250 ms after the start: it beats every 50 ms for 300 ms)
  // plus the 500 ms timeout; less a little, as file times come from the kernel's coarse clock.
  EXPECT_GE(result.detected_seconds - result.started_seconds, 0.7);
  for (int r : {0, 2}) EXPECT_TRUE(result.exits[r].stopped) << r;
  expect_no_survivors(dir, 3);
  fs::remove_all(dir);
}

TEST(SupervisorTest, ARankIsAllowedItsStartupBeforeItsFirstBeat) {
  // These workers never beat. With a first-beat allowance of 10 s they finish (after 400 ms)
  // unharmed; held to the 100 ms heartbeat timeout they are failed for it.
  const fs::path dir = fresh_dir("firstbeat");
  SupervisorOptions o = fake_job(dir, 2, /*failing=*/-1, 0, /*delay_ms=*/400);
  o.heartbeat_timeout = std::chrono::milliseconds(100);
  o.first_beat = std::chrono::milliseconds(10'000);
  EXPECT_TRUE(Supervisor(o).run().ok);
  o.first_beat = std::chrono::milliseconds(0);  // = the heartbeat timeout
  const SupervisorResult result = Supervisor(o).run();
  EXPECT_FALSE(result.ok);
  ASSERT_GE(result.failed_rank, 0);
  EXPECT_NE(result.exits[result.failed_rank].unhealthy.find("no first heartbeat"), std::string::npos) << result.message;
  fs::remove_all(dir);
}

TEST(SupervisorTest, TheSilentRankIsTheCulpritNotTheRanksThatWaitedForIt) {
  // Rank 1 beats once and freezes. After 3.2 s ranks 0 and 2 report a communication error and
  // exit (their collective timed out waiting for it). Heartbeat timeout 4 s: beats every 1 s,
  // silent after 3 s, so rank 1 (silent ~3.5 s) is named before its own heartbeat timeout.
  const fs::path dir = fresh_dir("silent");
  SupervisorOptions o = fake_job_mode(dir, 3, /*failing=*/1, /*code=*/1, /*delay_ms=*/3200, "silent");
  o.heartbeat_timeout = std::chrono::milliseconds(4000);
  const SupervisorResult result = Supervisor(o).run();
  EXPECT_EQ(result.failed_rank, 1) << result.message;
  EXPECT_TRUE(result.exits[1].silent);
  EXPECT_NE(result.exits[1].unhealthy.find("while ranks 0, 2 failed on communication: it stopped responding"),
            std::string::npos)
      << result.exits[1].unhealthy;
  EXPECT_TRUE(result.exits[0].error.value("comm", false));
  EXPECT_EQ(result.exits[1].error.value("detector", ""), "collective-timeout");
  expect_no_survivors(dir, 3);
  fs::remove_all(dir);

  // Without heartbeats the supervisor can only blame the earliest communication failure.
  const fs::path dir2 = fresh_dir("silent_noheartbeat");
  const SupervisorResult blind = Supervisor(fake_job_mode(dir2, 3, 1, 1, 300, "silent")).run();
  EXPECT_TRUE(blind.failed_rank == 0 || blind.failed_rank == 2) << blind.message;
  fs::remove_all(dir2);
}

TEST(SupervisorTest, ALaterAttemptKeepsTheEarlierAttemptsFiles) {
  const fs::path dir = fresh_dir("attempts");
  SupervisorOptions o = fake_job(dir, 2, /*failing=*/-1, 0, /*delay_ms=*/10);
  Supervisor(o).run();
  std::vector<std::string> attempts;
  o.attempt = 1;
  o.env["PARLAB_TEST"] = "1";
  o.on_message = [&](const nlohmann::json& j) { attempts.push_back(j.dump()); };
  Supervisor(o).run();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(fs::exists(dir / "attempt-0" / ("rank-" + std::to_string(r) + ".log"))) << r;
    EXPECT_TRUE(fs::exists(dir / "attempt-0" / ("rank-" + std::to_string(r) + ".jsonl"))) << r;
    EXPECT_TRUE(fs::exists(rank_log_path(dir, r))) << r;  // attempt 1's own
  }
  EXPECT_TRUE(attempts.empty());  // the fake worker writes step lines only
  fs::remove_all(dir);
}

TEST(JsonlTailTest, ReturnsOnlyCompleteNewLines) {
  const fs::path dir = fresh_dir("tail");
  fs::create_directories(dir);
  const fs::path f = dir / "x.jsonl";
  JsonlTail tail(f);
  EXPECT_TRUE(tail.read_new_lines().empty());  // missing file
  std::ofstream out(f);
  out << "{\"a\":1}\n{\"b\":" << std::flush;
  auto lines = tail.read_new_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "{\"a\":1}");
  out << "2}\n" << std::flush;
  lines = tail.read_new_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "{\"b\":2}");
  EXPECT_TRUE(tail.read_new_lines().empty());
  fs::remove_all(dir);
}

TEST(RunProgressTest, StepsCompleteWhenEveryRankReported) {
  RunProgress p(2, 4);
  train::StepRecord a;
  a.rank = 0;
  a.step = 0;
  a.global_batch = 8;
  a.loss_sum = 3.0;
  a.times.step_seconds = 0.5;
  a.times.forward_seconds = 0.25;
  train::StepRecord b = a;
  b.rank = 1;
  b.loss_sum = 5.0;
  b.times.step_seconds = 1.0;
  EXPECT_FALSE(p.add(a).has_value());
  const auto s = p.add(b);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->loss, (3.0 + 5.0) / 8);  // global mean loss
  EXPECT_DOUBLE_EQ(s->step_seconds, 1.0);      // the slowest rank
  EXPECT_DOUBLE_EQ(s->samples_per_s, 8.0);     // 8 samples / 1 s
  EXPECT_DOUBLE_EQ(s->eta_seconds, 3.0);       // 3 steps left x 1 s
  // A second step; the table then leaves step 0 out.
  a.step = b.step = 1;
  a.times.forward_seconds = 0.75;
  p.add(a);
  p.add(b);
  const auto table = p.rank_table();
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].steps, 1);
  EXPECT_DOUBLE_EQ(table[0].mean.forward_seconds, 0.75);
  EXPECT_EQ(format_progress(*s, 4).rfind("step 1/4  loss 1.0000", 0), 0u) << format_progress(*s, 4);
}

}  // namespace
}  // namespace parlab::launch
