// parlab-worker: one worker process of `parlab train` (what `parlab train --worker` runs), as a
// program of its own. The supervisor starts it when it sits beside parlab (launch::run_training):
// it links the runtime only, not the simulator (SimGrid and the ns-3 libraries under it cost every
// process of the whole binary ~23 ms of CPU to load and initialise), the database or the grader,
// so a worker -- and every restart -- starts in a few milliseconds.
//
//   parlab-worker --job=<job.json>   run the job's rank (rank, world, store from the environment)
//   parlab-worker --check-cuda       print why --device cuda cannot run here, or "cuda: available"
//                                    (loads the GPU plugin as a cuda worker would: a test that
//                                    this program exports what the plugin needs)
// Exit codes are parlab's: 2 for bad input (parlab::Error), 1 for any other failure, an injected
// failure's own code.
#include <cstdio>
#include <string>
#include <string_view>

#include "runtime/device/device.h"
#include "runtime/launch/worker.h"
#include "base/errors.h"

namespace {

void print_error(const std::string& line) noexcept {
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace parlab;
  const std::string_view arg = argc == 2 ? argv[1] : "";
  try {
    if (arg == "--check-cuda") {
      const std::string why = device::unavailable_reason(device::Kind::kCuda);
      std::printf("%s\n", why.empty() ? "cuda: available" : ("cuda: " + why).c_str());
      return 0;
    }
    if (!arg.starts_with("--job=")) {
      print_error("parlab-worker: usage: parlab-worker --job=<job.json> (started by `parlab train`)");
      return 2;
    }
    launch::run_train_worker(launch::read_train_job(std::string(arg.substr(6))));
  } catch (const launch::InjectedFailure& e) {
    print_error(std::string("parlab train worker: ") + e.what());
    return e.code();
  } catch (const Error& e) {
    print_error(std::string("parlab: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(std::string("parlab: unexpected error: ") + e.what());
    return 1;
  }
  return 0;
}
