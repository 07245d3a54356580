// A stand-in worker for the supervisor tests: reads RANK and PARLAB_RUN_DIR like a real worker,
// writes its pid, its PARLAB_STORE_TOKEN and one step record, then behaves as its arguments say:
//   fake_worker <failing rank> <exit code> <ms before exiting> [ignore-term | hang | silent]
// The failing rank exits with the code after the delay; the others sleep until signalled (with
// ignore-term they ignore SIGTERM, so only the supervisor's SIGKILL ends them); a failing rank
// of -1 means everybody exits 0 after the delay.
// Heartbeat modes (every rank touches rank-<r>.heartbeat every 50 ms, as liveness.h does):
//   hang     the failing rank stops beating after the delay and sleeps; the others beat on
//   silent   the failing rank stops beating after its first beat; after the delay every other
//            rank reports a communication error ({"type": "error", "comm": true}) and exits
//            with the code, as ranks whose collective timed out waiting for it would
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

void touch(const std::string& file) {
  std::ofstream(file, std::ios::app).flush();
  ::utimensat(AT_FDCWD, file.c_str(), nullptr, 0);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Beats every 50 ms until `ms` passed (forever when ms < 0).
void beat_for(const std::string& file, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (ms < 0 || std::chrono::steady_clock::now() < end) {
    touch(file);
    ::usleep(50'000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 64;
  const int failing = std::atoi(argv[1]), code = std::atoi(argv[2]), delay_ms = std::atoi(argv[3]);
  const std::string mode = argc > 4 ? argv[4] : "";
  const int rank = std::atoi(std::getenv("RANK"));
  const std::string dir = std::getenv("PARLAB_RUN_DIR");
  const std::string records = dir + "/rank-" + std::to_string(rank) + ".jsonl";
  const std::string heartbeat = dir + "/rank-" + std::to_string(rank) + ".heartbeat";
  std::ofstream(dir + "/pid-" + std::to_string(rank)) << ::getpid() << "\n";
  // The job token the supervisor gave this rank, for the test that every launch has its own.
  const char* token = std::getenv("PARLAB_STORE_TOKEN");
  std::ofstream(dir + "/token-" + std::to_string(rank)) << (token ? token : "") << "\n";
  std::ofstream(records) << R"({"type":"step","rank":)" << rank
                         << R"(,"world":2,"step":0,"epoch":0,"global_batch":4,"samples":2,"loss_sum":)" << (rank + 1)
                         << R"(,"data_seconds":0,"forward_seconds":0,"backward_seconds":0,"exposed_comm_seconds":0,)"
                         << R"("optimizer_seconds":0,"idle_seconds":0,"step_seconds":0.5,"comm_seconds":0})"
                         << "\n";
  if (mode == "ignore-term") ::signal(SIGTERM, SIG_IGN);
  std::printf("fake worker rank %d up\n", rank);
  std::fflush(stdout);
  if (mode == "hang") {
    beat_for(heartbeat, rank == failing ? delay_ms : -1);
    for (;;) ::pause();
  }
  if (mode == "silent") {
    if (rank == failing) {
      touch(heartbeat);
      for (;;) ::pause();
    }
    beat_for(heartbeat, delay_ms);
    std::ofstream(records, std::ios::app)
        << R"({"type":"error","rank":)" << rank << R"(,"comm":true,"kind":"hang","seconds":)" << now_seconds()
        << R"(,"message":"all-reduce #7 did not complete within 3.00 s"})"
        << "\n";
    return code;
  }
  ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
  if (failing < 0) return 0;
  if (rank == failing) {
    std::fprintf(stderr, "fake worker rank %d failing with code %d\n", rank, code);
    return code;
  }
  for (;;) ::pause();
}
