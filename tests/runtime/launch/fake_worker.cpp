// A stand-in worker for the supervisor tests: reads RANK and PARLAB_RUN_DIR like a real worker,
// writes its pid and one step record, then behaves as its arguments say:
//   fake_worker <failing rank> <exit code> <ms before exiting> [ignore-term]
// The failing rank exits with the code after the delay; the others sleep until signalled (with
// ignore-term they ignore SIGTERM, so only the supervisor's SIGKILL ends them); a failing rank
// of -1 means everybody exits 0 after the delay.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 4) return 64;
  const int failing = std::atoi(argv[1]), code = std::atoi(argv[2]), delay_ms = std::atoi(argv[3]);
  const bool ignore_term = argc > 4 && std::string(argv[4]) == "ignore-term";
  const int rank = std::atoi(std::getenv("RANK"));
  const std::string dir = std::getenv("PARLAB_RUN_DIR");
  std::ofstream(dir + "/pid-" + std::to_string(rank)) << ::getpid() << "\n";
  std::ofstream(dir + "/rank-" + std::to_string(rank) + ".jsonl")
      << R"({"type":"step","rank":)" << rank << R"(,"world":2,"step":0,"epoch":0,"global_batch":4,"samples":2,"loss_sum":)"
      << (rank + 1) << R"(,"data_seconds":0,"forward_seconds":0,"backward_seconds":0,"exposed_comm_seconds":0,)"
      << R"("optimizer_seconds":0,"idle_seconds":0,"step_seconds":0.5,"comm_seconds":0})" << "\n";
  if (ignore_term) ::signal(SIGTERM, SIG_IGN);
  std::printf("fake worker rank %d up\n", rank);
  std::fflush(stdout);
  ::usleep(static_cast<useconds_t>(delay_ms) * 1000);
  if (failing < 0) return 0;
  if (rank == failing) {
    std::fprintf(stderr, "fake worker rank %d failing with code %d\n", rank, code);
    return code;
  }
  for (;;) ::pause();
}
