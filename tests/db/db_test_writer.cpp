// A worker-like writer for the concurrency tests, started as a real process:
//   db_test_writer DB WRITER ROWS [--go-file PATH] [--hold] [--busy-ms MS]
// Opens DB, begins a measured run, waits for PATH to exist (so every writer starts together),
// then commits ROWS step rows, each in its own BEGIN IMMEDIATE transaction. step_seconds of step
// s is WRITER * 1000 + s, so the test can tell writers apart.
// Normally it marks the run completed and prints "done RUN". With --hold it instead opens one
// more transaction, inserts step ROWS without committing, prints "ready RUN" and waits to be
// killed: the test SIGKILLs it there.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>

#include "db/results_store.h"

namespace {

void wait_for(const std::filesystem::path& go_file) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(go_file)) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("no go file");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

parlab::db::StepTiming row(int writer, int step) {
  parlab::db::StepTiming t;
  t.step = step;
  t.rank = 0;
  t.step_seconds = writer * 1000.0 + step;
  t.samples = 8;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace parlab::db;
  if (argc < 4) {
    std::fprintf(stderr, "usage: db_test_writer DB WRITER ROWS [--go-file PATH] [--hold] [--busy-ms MS]\n");
    return 2;
  }
  // An orphan left behind by a crashed test must not live forever.
  ::alarm(60);
  const std::filesystem::path db = argv[1];
  const int writer = std::atoi(argv[2]);
  const int rows = std::atoi(argv[3]);
  std::filesystem::path go_file;
  bool hold = false;
  // --busy-ms 0 shows, by hand, that the writers really collide (they then fail with
  // "database is locked"); the tests keep the default.
  parlab::db::OpenOptions options;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--go-file" && i + 1 < argc) go_file = argv[++i];
    if (arg == "--hold") hold = true;
    if (arg == "--busy-ms" && i + 1 < argc) options.busy_timeout = std::chrono::milliseconds(std::atoi(argv[++i]));
  }
  try {
    auto store = ResultsStore::open(db, options);
    const RunId run = store.begin_run(
        {.kind = RunKind::kMeasured, .model = "writer", .world_size = 1, .notes = "writer " + std::to_string(writer)});
    if (!go_file.empty()) wait_for(go_file);
    for (int step = 0; step < rows; ++step) store.add_step_timing(run, row(writer, step));
    if (hold) {
      Transaction tx(store);
      store.add_step_timing(run, row(writer, rows));
      std::printf("ready %lld\n", static_cast<long long>(run));
      std::fflush(stdout);
      for (;;) ::pause();
    }
    store.mark_run_status(run, RunStatus::kCompleted);
    std::printf("done %lld\n", static_cast<long long>(run));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "db_test_writer %d: %s\n", writer, e.what());
    return 1;
  }
}
