#pragma once
// SimGrid allows one engine per process, for the life of the process. Every simulation therefore
// runs in a forked child: the child inherits the inputs (copy-on-write), runs the engine, writes
// its result as bytes into a pipe and leaves with _exit() (no atexit handlers or stdio buffers of
// the parent run twice). The parent reads the bytes and reaps the child. Callers (tests, the
// planner, the GUI) can simulate as often as they like.
//
// Progress crosses a second pipe: the child reports (fraction, line) records, the parent calls
// its callback with them on the thread that called run_isolated. The parent also watches a
// cancellation flag; when it is set, the child is killed (it holds nothing but its own memory)
// and run_isolated throws SimulationCancelled.
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace parlab::sim {

// A simulation stopped because its caller asked (SimOptions::cancel).
class SimulationCancelled : public RuntimeError {
 public:
  SimulationCancelled() : RuntimeError("simulation cancelled") {}
};

using ProgressFn = std::function<void(double fraction_done, std::string_view what)>;

struct IsolateOptions {
  ProgressFn on_progress;                     // in the parent; empty: progress is dropped
  const std::atomic<bool>* cancel = nullptr;  // polled about every 50 ms
};

// Runs `work` in a child process and returns what it returned. `work` gets the child's end of
// the progress pipe as a function (cheap; call it as often as you like, records are coalesced
// by the parent). An exception in the child comes back as RuntimeError with its message; a child
// killed by a signal (an abort inside SimGrid) as RuntimeError naming the signal.
std::string run_isolated(const std::function<std::string(const ProgressFn& report)>& work,
                         const IsolateOptions& options);
std::string run_isolated(const std::function<std::string()>& work);

// Several works, each in its own child, at most `parallel` at once (the machine's cores: the
// children share nothing); results in the order of `works`. The first failure kills the others
// and is thrown. on_progress gets the index of the work reporting. before_start(k) runs in the
// parent just before work k's child is forked (to build what only that child needs, while the
// others already run).
using JobProgressFn = std::function<void(size_t job, double fraction_done, std::string_view what)>;
std::vector<std::string> run_isolated_all(
    const std::vector<std::function<std::string(const ProgressFn& report)>>& works, int parallel,
    const JobProgressFn& on_progress = {}, const std::atomic<bool>* cancel = nullptr,
    const std::function<void(size_t job)>& before_start = {});

}  // namespace parlab::sim
