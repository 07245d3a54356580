#include "runtime/comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

#include "base/units.h"

namespace parlab::comm {
namespace {

using Clock = std::chrono::steady_clock;

enum Command : std::uint8_t { kSet = 1, kGet = 2, kCheck = 3 };
enum Status : std::uint8_t { kOk = 0, kMissing = 1 };
// Rendezvous values are addresses of a few KB; these bounds keep a stranger (or a bug) from
// growing rank 0 without limit.
constexpr std::uint32_t kMaxFrameBytes = 16u << 20;
constexpr std::size_t kMaxBufferedBytes = 64u << 20;  // half-received frames, all clients together
constexpr std::size_t kMaxStoredBytes = 256u << 20;   // keys and values

std::string errno_text() { return std::strerror(errno); }

void put_u32(std::vector<char>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void put_field(std::vector<char>& out, const char* data, std::size_t n) {
  put_u32(out, static_cast<std::uint32_t>(n));
  out.insert(out.end(), data, data + n);
}

// Reads fields out of one payload; every getter returns false on a short or malformed payload.
struct Cursor {
  const char* p;
  std::size_t left;
  bool u8(std::uint8_t& v) {
    if (left < 1) return false;
    v = static_cast<std::uint8_t>(*p++);
    --left;
    return true;
  }
  bool u32(std::uint32_t& v) {
    if (left < 4) return false;
    v = get_u32(p);
    p += 4;
    left -= 4;
    return true;
  }
  bool field(std::string& s) {
    std::uint32_t n = 0;
    if (!u32(n) || left < n) return false;
    s.assign(p, n);
    p += n;
    left -= n;
    return true;
  }
};

class FdCloser {
 public:
  explicit FdCloser(int fd = -1) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() { return std::exchange(fd_, -1); }
  int get() const { return fd_; }

 private:
  int fd_;
};

// ---- server side ----

struct Client {
  int fd;
  std::string in, out;
};

using Map = std::unordered_map<std::string, std::vector<char>>;

struct Served {
  Map map;
  std::size_t stored_bytes = 0;
  std::size_t buffered_bytes = 0;  // sum of every client's `in`
  std::string token;
};

// Compares without stopping at the first difference, so timing does not leak the token.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Executes one request; nullopt when it is malformed (the caller drops the client).
std::optional<std::vector<char>> handle(Served& served, const char* payload, std::size_t n) {
  Map& map = served.map;
  Cursor c{payload, n};
  std::string token;
  if (!c.field(token) || !same_token(token, served.token)) return std::nullopt;
  std::uint8_t command = 0;
  if (!c.u8(command)) return std::nullopt;
  std::vector<char> reply;
  std::string key, value;
  switch (command) {
    case kSet:
      if (!c.field(key) || !c.field(value)) return std::nullopt;
      {
        const auto it = map.find(key);
        const std::size_t old = it == map.end() ? 0 : key.size() + it->second.size();
        if (served.stored_bytes - old + key.size() + value.size() > kMaxStoredBytes) return std::nullopt;
        served.stored_bytes = served.stored_bytes - old + key.size() + value.size();
      }
      map[key] = std::vector<char>(value.begin(), value.end());
      reply.push_back(static_cast<char>(kOk));
      return reply;
    case kGet: {
      if (!c.field(key)) return std::nullopt;
      auto it = map.find(key);
      if (it == map.end()) {
        reply.push_back(static_cast<char>(kMissing));
      } else {
        reply.push_back(static_cast<char>(kOk));
        put_field(reply, it->second.data(), it->second.size());
      }
      return reply;
    }
    case kCheck: {
      std::uint32_t count = 0;
      if (!c.u32(count)) return std::nullopt;
      bool all = true;
      for (std::uint32_t i = 0; i < count; ++i) {
        if (!c.field(key)) return std::nullopt;
        all = all && map.count(key) > 0;
      }
      reply.push_back(static_cast<char>(all ? kOk : kMissing));
      return reply;
    }
    default:
      return std::nullopt;
  }
}

// Parses every complete frame in `client.in`, queues replies; false drops the client.
bool process_frames(Served& served, Client& client) {
  std::size_t used = 0;
  while (client.in.size() - used >= 4) {
    const std::uint32_t n = get_u32(client.in.data() + used);
    if (n > kMaxFrameBytes) return false;
    if (client.in.size() - used - 4 < n) break;
    auto reply = handle(served, client.in.data() + used + 4, n);
    if (!reply) return false;
    std::vector<char> frame;
    put_u32(frame, static_cast<std::uint32_t>(reply->size()));
    frame.insert(frame.end(), reply->begin(), reply->end());
    client.out.append(frame.data(), frame.size());
    used += 4 + n;
  }
  client.in.erase(0, used);
  served.buffered_bytes -= used;
  return true;
}

// Reads what is available; false when the peer closed or failed.
bool read_available(Served& served, Client& client) {
  char buf[65536];
  for (;;) {
    const ssize_t got = ::recv(client.fd, buf, sizeof buf, 0);
    if (got > 0) {
      client.in.append(buf, static_cast<std::size_t>(got));
      served.buffered_bytes += static_cast<std::size_t>(got);
      if (client.in.size() > kMaxFrameBytes + 8 || served.buffered_bytes > kMaxBufferedBytes) return false;
      continue;
    }
    if (got == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// Writes what the socket takes; false on a broken connection.
bool write_pending(Client& client) {
  while (!client.out.empty()) {
    const ssize_t put = ::send(client.fd, client.out.data(), client.out.size(), MSG_NOSIGNAL);
    if (put > 0) {
      client.out.erase(0, static_cast<std::size_t>(put));
      continue;
    }
    return put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

void set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

void resolve(const std::string& host, int port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) {
    throw StoreError("tcp store: cannot resolve " + host + ":" + service + ": " + ::gai_strerror(rc));
  }
}

// ---- client side ----

// One non-blocking connect attempt to any address of host:port, bounded by `deadline`.
int try_connect(const std::string& host, int port, Clock::time_point deadline) {
  AddrInfo addrs;
  resolve(host, port, false, addrs);
  for (addrinfo* a = addrs.list; a; a = a->ai_next) {
    FdCloser fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) continue;
    set_nonblocking(fd.get(), true);
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) continue;
      pollfd p{fd.get(), POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 0))) != 1) continue;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) continue;
    }
    set_nonblocking(fd.get(), false);
    set_nodelay(fd.get());
    return fd.release();
  }
  return -1;
}

// Blocks until all `n` bytes moved or the connection failed.
bool send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

bool recv_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

std::string list_keys(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (const auto& k : keys) s += (s.size() > 1 ? ", " : "") + k;
  return s + "]";
}

}  // namespace

// ---- TcpStoreServer ----

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token) : token_(std::move(token)) {
  if (port < 0 || port > 65535) {
    throw ConfigError("MASTER_PORT", std::to_string(port), "must be in [0, 65535]");
  }
  AddrInfo addrs;
  resolve(host, port, true, addrs);
  std::string last_error = "no address";
  for (addrinfo* a = addrs.list; a && listen_fd_ < 0; a = a->ai_next) {
    FdCloser fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_error = errno_text();
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    set_nonblocking(fd.get(), true);
    listen_fd_ = fd.release();
  }
  if (listen_fd_ < 0) {
    throw StoreError("tcp store: cannot listen on " + host + ":" + std::to_string(port) + ": " + last_error);
  }
  if (::pipe2(wake_fds_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw StoreError("tcp store: pipe: " + errno_text());
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char byte = 1;
  [[maybe_unused]] ssize_t ignored = ::write(wake_fds_[1], &byte, 1);
  thread_.join();
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
  ::close(listen_fd_);
}

void TcpStoreServer::serve() {
  Served served;
  served.token = token_;
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({pollfd{wake_fds_[0], POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    for (const Client& c : clients) {
      fds.push_back(pollfd{c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    // Serve existing clients first (their indices match fds[2..]), then accept new ones.
    std::vector<Client> alive;
    for (std::size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      const short ev = fds[i + 2].revents;
      bool ok = true;
      if (ev & (POLLIN | POLLHUP | POLLERR)) ok = read_available(served, c) && process_frames(served, c);
      if (ok && (ev & POLLNVAL)) ok = false;
      if (ok) ok = write_pending(c);
      if (ok) {
        alive.push_back(std::move(c));
      } else {
        served.buffered_bytes -= c.in.size();  // what a dropped client had half-sent is freed
        ::close(c.fd);
      }
    }
    clients = std::move(alive);
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        set_nodelay(fd);
        clients.push_back(Client{fd, {}, {}});
      }
    }
  }
  for (const Client& c : clients) ::close(c.fd);
}

// ---- TcpStore ----

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds connect_timeout, std::string token)
    : endpoint_(host + ":" + std::to_string(port)), token_(std::move(token)) {
  if (port <= 0 || port > 65535) {
    throw ConfigError("MASTER_PORT", std::to_string(port), "must be in [1, 65535]");
  }
  const auto deadline = Clock::now() + connect_timeout;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    fd_ = try_connect(host, port, deadline);
    if (fd_ >= 0) {
      // A host that vanished without a reset must not block a request forever.
      timeval io{};
      io.tv_sec = std::max<long>(60, std::chrono::duration_cast<std::chrono::seconds>(connect_timeout).count());
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof io);
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof io);
      return;
    }
    if (Clock::now() >= deadline) {
      throw StoreTimeout("tcp store " + endpoint_ + ": no server answered within " +
                         units::format_seconds(std::chrono::duration<double>(connect_timeout).count()) +
                         " (is rank 0 up, and MASTER_ADDR/MASTER_PORT right?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<char> TcpStore::request(const std::vector<char>& payload) {
  std::lock_guard lock(mu_);
  if (fd_ < 0) throw StoreError("tcp store " + endpoint_ + ": connection lost earlier");
  std::vector<char> frame;
  put_u32(frame, static_cast<std::uint32_t>(4 + token_.size() + payload.size()));
  put_field(frame, token_.data(), token_.size());
  frame.insert(frame.end(), payload.begin(), payload.end());
  char header[4];
  std::vector<char> reply;
  bool ok = send_all(fd_, frame.data(), frame.size()) && recv_all(fd_, header, 4);
  if (ok) {
    const std::uint32_t n = get_u32(header);
    ok = n >= 1 && n <= kMaxFrameBytes;
    if (ok) {
      reply.resize(n);
      ok = recv_all(fd_, reply.data(), n);
    }
  }
  if (!ok) {
    ::close(fd_);
    fd_ = -1;
    throw StoreError(
        "tcp store " + endpoint_ + ": connection failed (server gone, or it refused the request: " +
        "a token other than rank 0's -- from PARLAB_STORE_TOKEN, PARLAB_STORE_TOKEN_FILE or the run directory's " +
        "store_token file --, or a value past its limits?)");
  }
  return reply;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  std::vector<char> p{static_cast<char>(kSet)};
  put_field(p, key.data(), key.size());
  put_field(p, data.data(), data.size());
  request(p);
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, kDefaultTimeout);
  std::vector<char> p{static_cast<char>(kGet)};
  put_field(p, key.data(), key.size());
  const std::vector<char> reply = request(p);
  Cursor c{reply.data() + 1, reply.size() - 1};
  std::string value;
  if (reply[0] != static_cast<char>(kOk) || !c.field(value)) {
    throw StoreError("tcp store " + endpoint_ + ": key " + key + " vanished");
  }
  return std::vector<char>(value.begin(), value.end());
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  std::vector<char> p{static_cast<char>(kCheck)};
  put_u32(p, static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) put_field(p, k.data(), k.size());
  return request(p)[0] == static_cast<char>(kOk);
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo's convention: a zero timeout waits forever.
  const bool bounded = timeout.count() > 0;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!check(keys)) {
    if (bounded && Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (const auto& k : keys) {
        if (!check({k})) missing.push_back(k);
      }
      throw StoreTimeout("tcp store " + endpoint_ + ": keys " + list_keys(missing) + " still missing after " +
                         units::format_seconds(std::chrono::duration<double>(timeout).count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

TcpRendezvous make_tcp_rendezvous(const RendezvousEnv& env, const std::string& bind_host,
                                  std::chrono::milliseconds connect_timeout) {
  if (env.master_addr.empty()) {
    throw ConfigError("MASTER_ADDR", "<unset>", "the host of rank 0 (e.g. the first host of the Slurm allocation)");
  }
  if (env.master_port <= 0) {
    throw ConfigError("MASTER_PORT", "<unset>", "a free TCP port on rank 0's host, in [1, 65535]");
  }
  // Without a token anyone who can reach the port reads and sets the job's keys (store_token.h).
  if (env.store_token.empty()) {
    throw ConfigError("PARLAB_STORE_TOKEN", "<unset>",
                      "the TCP rendezvous store refuses to run without a per-job token (see resolve_store_token)");
  }
  TcpRendezvous out;
  if (env.rank == 0) out.server = std::make_unique<TcpStoreServer>(bind_host, env.master_port, env.store_token);
  out.store = std::make_shared<TcpStore>(env.master_addr, env.master_port, connect_timeout, env.store_token);
  return out;
}

}  // namespace parlab::comm
