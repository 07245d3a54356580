// A rank of a real multi-process job, for the end-to-end tests.
//
//   comm_worker all-reduce --store file:<dir> --rank R --size N --count C --out <path>
//   comm_worker all-reduce --store env --count C --out <path>
//       Rendezvous (a file store, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT with rank 0 hosting
//       the TCP store), all-reduce C floats where rank r holds r + 1 + i, write
//       "<rank> <size> <launcher>" and the C results (one per line) to <path>.
//       --comm shm: connect the shared-memory backend instead of Gloo.
//       --hold-rank R: after writing its result, rank R sleeps (for a test to kill -9 it); the
//       others then run a second all-reduce and exit 3 if it fails with a CollectiveError (a
//       peer is gone), 4 on a timeout.
//   comm_worker store-echo --port P
//       Connect to the TCP store on 127.0.0.1:P, wait for "ping", set "pong" = "echo:" + ping.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/rendezvous.h"
#include "runtime/comm/shm/shm_communicator.h"
#include "runtime/comm/tcp_store.h"

namespace {

using namespace parlab::comm;

std::map<std::string, std::string> parse_flags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  return flags;
}

int all_reduce(std::map<std::string, std::string> flags) {
  std::shared_ptr<Store> store;
  TcpRendezvous tcp;  // rank 0 hosts the server for the whole run
  int rank = 0, size = 1;
  std::string launcher = "flags";
  const std::string where = flags.at("--store");
  if (where.rfind("file:", 0) == 0) {
    store = make_file_store(where.substr(5));
    rank = std::stoi(flags.at("--rank"));
    size = std::stoi(flags.at("--size"));
  } else {
    const RendezvousEnv env = from_env();
    rank = env.rank;
    size = env.world_size;
    launcher = env.launcher;
    tcp = make_tcp_rendezvous(env);
    store = tcp.store;
  }
  GlooOptions options;
  options.timeout = std::chrono::seconds(20);
  const bool shm = flags.count("--comm") && flags.at("--comm") == "shm";
  auto comm = shm ? make_shm_communicator(store, rank, size, shm_options_from(options))
                  : make_gloo_communicator(store, rank, size, options);
  const int hold = flags.count("--hold-rank") ? std::stoi(flags.at("--hold-rank")) : -1;
  const auto count = static_cast<std::size_t>(std::stoul(flags.at("--count")));
  std::vector<float> buf(count);
  for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + i);
  CollectiveOptions o;
  o.timeout = options.timeout;
  comm->all_reduce(buf, o)->wait();
  comm->barrier(o)->wait();  // nobody exits (closing its pairs) while a peer still works

  {
    std::ofstream out(flags.at("--out") + ".tmp");
    out.precision(9);
    out << rank << " " << size << " " << launcher << "\n";
    for (float x : buf) out << x << "\n";
    if (!out) return 1;
  }
  std::filesystem::rename(flags.at("--out") + ".tmp", flags.at("--out"));  // whole, or not there
  if (hold < 0) return 0;
  if (rank == hold) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  try {
    comm->all_reduce(buf, o)->wait();
    return 0;
  } catch (const CollectiveTimeout&) {
    return 4;
  } catch (const CollectiveError& e) {
    std::fprintf(stderr, "comm_worker: %s\n", e.what());
    return 3;
  }
}

int store_echo(std::map<std::string, std::string> flags) {
  TcpStore store("127.0.0.1", std::stoi(flags.at("--port")), std::chrono::seconds(10));
  store.wait({"ping"}, std::chrono::seconds(10));
  const std::vector<char> ping = store.get("ping");
  const std::string pong = "echo:" + std::string(ping.begin(), ping.end());
  store.set("pong", std::vector<char>(pong.begin(), pong.end()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: comm_worker all-reduce|store-echo --flag value ...\n");
    return 2;
  }
  try {
    const std::string mode = argv[1];
    if (mode == "all-reduce") return all_reduce(parse_flags(argc, argv));
    if (mode == "store-echo") return store_echo(parse_flags(argc, argv));
    std::fprintf(stderr, "comm_worker: unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_worker: %s\n", e.what());
    return 1;
  }
}
