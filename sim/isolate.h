#pragma once
// SimGrid allows one engine per process, for the life of the process. Every simulation therefore
// runs in a forked child: the child inherits the inputs (copy-on-write), runs the engine, writes
// its result as bytes into a pipe and leaves with _exit() (no atexit handlers or stdio buffers of
// the parent run twice). The parent reads the bytes and reaps the child. Callers (tests, the
// planner, the GUI) can simulate as often as they like.
#include <functional>
#include <string>

namespace parlab::sim {

// Runs `work` in a child process and returns what it returned. An exception in the child comes
// back as RuntimeError with its message; a child killed by a signal (an abort inside SimGrid)
// as RuntimeError naming the signal.
std::string run_isolated(const std::function<std::string()>& work);

}  // namespace parlab::sim
