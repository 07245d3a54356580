// The job token under torchrun/srun: drawn at random, shared through an owner-only file that the
// first rank creates, refused when the file is no secret, and required by the TCP rendezvous.
#include "runtime/comm/store_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <thread>

#include "runtime/comm/tcp_store.h"
#include "tests/support/ports.h"
#include "tests/support/scratch_dir.h"

namespace parlab::comm {
namespace {

namespace fs = std::filesystem;

RendezvousEnv env_of(std::map<std::string, std::string> vars) {
  return from_env([&](const std::string& k) -> std::optional<std::string> {
    const auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(StoreToken, RandomTokensAre128BitsOfHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    const std::string t = random_store_token();
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 16u);
}

// Ranks racing to create the file all end with the one token that landed, in a 0600 file.
TEST(StoreToken, ConcurrentRanksShareTheFileTheFirstCreated) {
  testing::ScratchDir dir;
  const fs::path file = dir / "run" / "store_token";
  std::vector<std::string> got(8);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 8; ++r) ranks.emplace_back([&, r] { got[r] = read_or_create_token_file(file, "test"); });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(got[0].size(), 32u);
  for (int r = 1; r < 8; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r;
  EXPECT_EQ(fs::status(file).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(file.parent_path())) leftovers += e.path() != file;
  EXPECT_EQ(leftovers, 0) << "temporary token files were left behind";
  EXPECT_EQ(read_or_create_token_file(file, "test"), got[0]);  // an existing file is read, not replaced
}

TEST(StoreToken, AFileOthersMayReadIsRefused) {
  testing::ScratchDir dir;
  const fs::path file = dir / "token";
  std::ofstream(file) << "guessable\n";
  ::chmod(file.c_str(), 0644);
  const std::string m = message_of([&] { read_or_create_token_file(file, "PARLAB_STORE_TOKEN_FILE"); });
  EXPECT_NE(m.find("PARLAB_STORE_TOKEN_FILE"), std::string::npos) << m;
  EXPECT_NE(m.find("mode 0644"), std::string::npos) << m;
  ::chmod(file.c_str(), 0600);
  EXPECT_EQ(read_or_create_token_file(file, "PARLAB_STORE_TOKEN_FILE"), "guessable");
  std::ofstream(file, std::ios::trunc) << "\n";
  EXPECT_NE(message_of([&] { read_or_create_token_file(file, "x"); }).find("empty"), std::string::npos);
}

// The order: PARLAB_STORE_TOKEN, then PARLAB_STORE_TOKEN_FILE, then the run directory's file.
TEST(StoreToken, ResolvedFromTheEnvironmentThenTheNamedFileThenTheRunDirectory) {
  testing::ScratchDir dir;
  const std::map<std::string, std::string> base = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(base.begin(), base.end());
    return env_of(extra);
  };
  RendezvousEnv e = with({{"PARLAB_STORE_TOKEN", "from-env"}, {"PARLAB_STORE_TOKEN_FILE", (dir / "f").string()}});
  resolve_store_token(e, dir / "run");
  EXPECT_EQ(e.store_token, "from-env");
  EXPECT_FALSE(fs::exists(dir / "f"));

  e = with({{"PARLAB_STORE_TOKEN_FILE", (dir / "f").string()}});
  resolve_store_token(e, dir / "run");
  EXPECT_EQ(e.store_token, read_or_create_token_file(dir / "f", "test"));
  EXPECT_FALSE(fs::exists(store_token_path(dir / "run")));

  e = with({{"PARLAB_STORE_TOKEN", ""}});  // empty counts as unset
  resolve_store_token(e, dir / "run");
  EXPECT_EQ(e.store_token, read_or_create_token_file(store_token_path(dir / "run"), "test"));
  EXPECT_EQ(e.store_token.size(), 32u);

  e = with({});
  const std::string m = message_of([&] { resolve_store_token(e, {}); });
  EXPECT_EQ(m.rfind("PARLAB_STORE_TOKEN = <unset>", 0), 0u) << m;
  EXPECT_NE(message_of([&] {
              with({{"PARLAB_STORE_TOKEN_FILE", ""}});
            }).find("PARLAB_STORE_TOKEN_FILE"),
            std::string::npos);
}

// A job never opens an unauthenticated TCP store; two ranks that resolved their token through one
// run directory meet, and a rank holding another token is turned away.
TEST(StoreToken, TheTcpRendezvousNeedsTheJobsToken) {
  testing::ScratchDir dir;
  const std::string port = std::to_string(parlab::testing::unused_loopback_port());
  auto rank_env = [&](int r) {
    return env_of(
        {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}});
  };
  RendezvousEnv bare = rank_env(0);
  const std::string m = message_of([&] { make_tcp_rendezvous(bare); });
  EXPECT_EQ(m.rfind("PARLAB_STORE_TOKEN = <unset>", 0), 0u) << m;

  RendezvousEnv r0 = rank_env(0), r1 = rank_env(1);
  resolve_store_token(r0, dir / "run");
  resolve_store_token(r1, dir / "run");
  TcpRendezvous a = make_tcp_rendezvous(r0, "127.0.0.1", std::chrono::seconds(10));
  TcpRendezvous b = make_tcp_rendezvous(r1, "127.0.0.1", std::chrono::seconds(10));
  a.store->set("addr", {'x'});
  EXPECT_EQ(b.store->get("addr"), std::vector<char>{'x'});
  RendezvousEnv stranger = rank_env(1);
  stranger.store_token = random_store_token();
  TcpRendezvous c = make_tcp_rendezvous(stranger, "127.0.0.1", std::chrono::seconds(10));
  EXPECT_THROW(c.store->check({"addr"}), StoreError);
}

}  // namespace
}  // namespace parlab::comm
