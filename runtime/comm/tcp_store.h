#pragma once
// A small TCP key-value store for rendezvous across hosts (Gloo ships none). Rank 0 hosts a
// TcpStoreServer at MASTER_ADDR:MASTER_PORT; every rank (rank 0 included) talks to it through a
// TcpStore client, which is a gloo::rendezvous::Store and so can feed Gloo's connectFullMesh.
//
// Wire format: every message is a frame  [u32 payload bytes, big-endian][payload].
//   request payload  = [token field][u8 command][fields...]; a field is [u32 bytes][bytes]
//     SET   key value        -> [u8 kOk]
//     GET   key              -> [u8 kOk][value field]  or [u8 kMissing]
//     CHECK u32 n, n keys    -> [u8 kOk] if every key exists, else [u8 kMissing]
// The server is one thread polling every socket (poll(2)); it never blocks on a slow client, and
// a malformed or oversized frame (> 16 MiB) closes only that client's connection. A request whose
// token is not the job's closes the connection too, so nobody without the token reads or sets a
// key. Memory is bounded: at most 64 MiB of half-received frames over all clients and 256 MiB of
// stored values (a client that would pass either is dropped). Keys are never deleted: a job's keys
// are scoped by attempt (see rendezvous.h), so stale ones are harmless.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/rendezvous.h"

namespace parlab::comm {

class TcpStoreServer {
 public:
  // Binds `host`:`port` (port 0: the kernel picks one; see port()) and serves until destroyed.
  // Loopback by default; pass "0.0.0.0" or the host's address to serve other machines.
  // Throws StoreError if the address cannot be bound.
  // `token`: what every request must carry (empty: none).
  explicit TcpStoreServer(const std::string& host = "127.0.0.1", int port = 0, std::string token = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  void serve();

  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // a pipe: the destructor writes one byte to stop serve()
  std::string token_;
  int port_ = 0;
  std::thread thread_;
};

class TcpStore final : public Store {
 public:
  // Connects to host:port, retrying until `connect_timeout` (the server may start after us).
  // Throws StoreTimeout if it never answers.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds connect_timeout = kDefaultTimeout,
           std::string token = {});
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  // Sends one request frame and returns the reply payload. Throws StoreError.
  std::vector<char> request(const std::vector<char>& payload);

  std::string endpoint_;  // "host:port", for messages
  std::string token_;     // sent with every request
  std::mutex mu_;         // one request at a time on the socket
  int fd_ = -1;
};

// The usual multi-host setup from launcher variables: rank 0 hosts a TcpStoreServer on
// `bind_host`:MASTER_PORT, and every rank (rank 0 included) connects a TcpStore to
// MASTER_ADDR:MASTER_PORT. Keep the returned value alive for as long as the job may rendezvous
// (split() uses the store too). Throws ConfigError when MASTER_ADDR/MASTER_PORT are missing, or
// when env.store_token is empty: a job never opens an unauthenticated store (store_token.h).
struct TcpRendezvous {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::shared_ptr<Store> store;
};
// `bind_host`: "127.0.0.1" serves this machine only; pass "0.0.0.0" (or the host's address)
// when other hosts must reach rank 0.
TcpRendezvous make_tcp_rendezvous(const RendezvousEnv& env, const std::string& bind_host = "127.0.0.1",
                                  std::chrono::milliseconds connect_timeout = kDefaultTimeout);

}  // namespace parlab::comm
