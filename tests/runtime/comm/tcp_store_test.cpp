// The TCP rendezvous store: set/get/wait across threads, across a real child process, robust
// to a malformed client, and usable by Gloo for a full rendezvous.
#include "runtime/comm/tcp_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <thread>

#include "tests/runtime/comm/child_process.h"
#include "tests/runtime/comm/comm_fixture.h"
#include "tests/support/ports.h"
#include "tests/support/scratch_dir.h"

namespace parlab::comm {
namespace {

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

TEST(TcpStore, SetGetWaitAcrossThreads) {
  TcpStoreServer server;  // 127.0.0.1, a port the kernel picks
  ASSERT_GT(server.port(), 0);
  TcpStore a("127.0.0.1", server.port());
  TcpStore b("127.0.0.1", server.port());

  EXPECT_FALSE(a.check({"k1"}));
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.set("k1", bytes("hello"));
    b.set("k2", std::vector<char>(100'000, 'x'));  // larger than one socket read
  });
  a.wait({"k1", "k2"}, std::chrono::seconds(10));
  writer.join();
  EXPECT_EQ(text(a.get("k1")), "hello");
  EXPECT_EQ(a.get("k2").size(), 100'000u);
  EXPECT_TRUE(a.check({"k1", "k2"}));
  b.set("k1", bytes("again"));  // last writer wins
  EXPECT_EQ(text(a.get("k1")), "again");
  b.set("empty", {});
  EXPECT_TRUE(a.get("empty").empty());
}

TEST(TcpStore, WaitTimesOutNamingMissingKeys) {
  TcpStoreServer server;
  TcpStore a("127.0.0.1", server.port());
  a.set("present", bytes("1"));
  try {
    a.wait({"present", "absent"}, std::chrono::milliseconds(100));
    FAIL() << "wait returned without the key";
  } catch (const StoreTimeout& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[absent]"), std::string::npos) << m;
    EXPECT_EQ(m.find("present"), std::string::npos) << m;
  }
}

TEST(TcpStore, ClientWithoutServerTimesOut) {
  const int port = parlab::testing::unused_loopback_port();
  EXPECT_THROW(TcpStore("127.0.0.1", port, std::chrono::milliseconds(200)), StoreTimeout);
}

TEST(TcpStore, MalformedClientDoesNotHurtOthers) {
  TcpStoreServer server;
  TcpStore good("127.0.0.1", server.port());
  good.set("k", bytes("v"));
  // A raw client announcing a 4 GiB frame, then an unknown command: both get dropped.
  for (const std::vector<unsigned char>& junk :
       {std::vector<unsigned char>{0xff, 0xff, 0xff, 0xff}, std::vector<unsigned char>{0, 0, 0, 1, 0x7f}}) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::send(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0) << "server should close a malformed client";
    ::close(fd);
  }
  EXPECT_EQ(text(good.get("k")), "v");
}

// A raw loopback connection to `port`.
int raw_client(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// Whether the server closed `fd` within a second: EOF, or a reset (a socket closed with unread
// data in it sends RST).
bool closed_by_server(int fd) {
  timeval t{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  char c;
  const ssize_t r = ::recv(fd, &c, 1, 0);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

TEST(TcpStore, EveryRequestMustCarryTheJobsToken) {
  TcpStoreServer server("127.0.0.1", 0, "s3cret-token");
  TcpStore good("127.0.0.1", server.port(), kDefaultTimeout, "s3cret-token");
  good.set("addr", bytes("pointer-like"));
  // Without the token, or with another one, nothing can be read or set: the server hangs up.
  TcpStore none("127.0.0.1", server.port());
  EXPECT_THROW(none.check({"addr"}), StoreError);
  TcpStore wrong("127.0.0.1", server.port(), kDefaultTimeout, "s3cret-tokeN");
  EXPECT_THROW(wrong.set("addr", bytes("family mismatch")), StoreError);
  EXPECT_EQ(text(good.get("addr")), "pointer-like");
  // The token reaches the store from the launcher's environment.
  const RendezvousEnv env = from_env([](const std::string& k) -> std::optional<std::string> {
    if (k == "RANK") return "0";
    if (k == "WORLD_SIZE") return "1";
    if (k == "PARLAB_STORE_TOKEN") return "from-env";
    return std::nullopt;
  });
  EXPECT_EQ(env.store_token, "from-env");
}

TEST(TcpStore, HalfSentFramesAndHugeValuesCannotGrowTheServerWithoutBound) {
  TcpStoreServer server;
  TcpStore good("127.0.0.1", server.port());
  good.set("k", bytes("v"));
  // Six clients each announce a 15 MiB frame and send 12 MiB of it: past 64 MiB buffered in all,
  // the server drops the one that crosses the line (before, each could hold 64 MiB for ever).
  const std::string chunk(12u << 20, 'x');
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) {
    const int fd = raw_client(server.port());
    const std::vector<unsigned char> header{0x00, 0xf0, 0x00, 0x00};  // 15 MiB
    ::send(fd, header.data(), header.size(), MSG_NOSIGNAL);
    ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  int dropped = 0;
  for (int fd : fds) {
    dropped += closed_by_server(fd);
    ::close(fd);
  }
  EXPECT_GE(dropped, 1) << "72 MiB of half-sent frames were all kept";
  // A single frame past 16 MiB is refused outright.
  const int big = raw_client(server.port());
  const std::vector<unsigned char> huge{0x01, 0x10, 0x00, 0x00};  // 17 MiB
  ::send(big, huge.data(), huge.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(closed_by_server(big));
  ::close(big);
  // Stored values are capped at 256 MiB in all: the client that passes it is dropped.
  TcpStore filler("127.0.0.1", server.port());
  const std::vector<char> value(15u << 20, 'v');
  bool refused = false;
  for (int i = 0; i < 20 && !refused; ++i) {
    try {
      filler.set("big-" + std::to_string(i), value);
    } catch (const StoreError&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "300 MiB of values were stored";
  EXPECT_EQ(text(good.get("k")), "v");  // everyone else is still served
}

TEST(TcpStore, ServesOnlyLoopbackByDefault) {
  TcpStoreServer server;
  // Listening on 127.0.0.1 (not 0.0.0.0): find our listening socket in /proc/net/tcp.
  std::ifstream tcp("/proc/net/tcp");
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04X", server.port());
  bool loopback = false, any = false;
  for (std::string line; std::getline(tcp, line);) {
    if (line.find(std::string(":") + port_hex + " 00000000:0000 0A") == std::string::npos) continue;
    loopback = loopback || line.find("0100007F:" + std::string(port_hex)) != std::string::npos;
    any = any || line.find("00000000:" + std::string(port_hex)) != std::string::npos;
  }
  EXPECT_TRUE(loopback);
  EXPECT_FALSE(any);
}

TEST(TcpStore, RealChildProcess) {
  TcpStoreServer server;
  TcpStore parent("127.0.0.1", server.port());
  testing::ChildProcess child({PARLAB_COMM_WORKER, "store-echo", "--port", std::to_string(server.port())});
  parent.set("ping", bytes("42"));
  parent.wait({"pong"}, std::chrono::seconds(20));
  EXPECT_EQ(text(parent.get("pong")), "echo:42");
  EXPECT_EQ(child.wait(std::chrono::seconds(20)), 0);
}

// Gloo's full-mesh rendezvous through our store, threads as ranks.
TEST(TcpStore, DrivesAGlooRendezvous) {
  TcpStoreServer server;
  auto store = std::make_shared<TcpStore>("127.0.0.1", server.port());
  testing::run_ranks(
      3,
      [](int r, Communicator& comm) {
        std::vector<float> buf(10, static_cast<float>(r));
        comm.all_reduce(buf, testing::op_options())->wait();
        EXPECT_EQ(buf[9], 3.0f);  // 0 + 1 + 2
      },
      testing::test_options(), store);
}

}  // namespace
}  // namespace parlab::comm

namespace parlab::comm {
namespace {

// Rendezvous values carry addresses and pointer-like bytes, and a key planted by someone else
// can abort the job: the file store's directory is owner-only and so is every value file.
TEST(FileStore, DirectoryAndValuesAreOwnerOnly) {
  parlab::testing::ScratchDir dir;
  const std::filesystem::path where = dir.path() / "rendezvous";
  auto store = make_file_store(where);
  store->set("rank-0", std::vector<char>{'a', 'b'});
  namespace fs = std::filesystem;
  const fs::perms others = fs::perms::group_all | fs::perms::others_all;
  EXPECT_EQ(fs::status(where).permissions() & others, fs::perms::none);
  int files = 0;
  for (const auto& e : fs::directory_iterator(where)) {
    if (!e.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(e.status().permissions() & others, fs::perms::none) << e.path();
  }
  EXPECT_GE(files, 1);
  EXPECT_EQ(store->get("rank-0"), (std::vector<char>{'a', 'b'}));
}

}  // namespace
}  // namespace parlab::comm
