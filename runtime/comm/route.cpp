#include "runtime/comm/route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace parlab::comm {
namespace {

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

}  // namespace

bool resolves_to_loopback(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  bool all = true;
  for (const addrinfo* p = res; p; p = p->ai_next) all = all && is_loopback(p->ai_addr);
  ::freeaddrinfo(res);
  return all;
}

std::optional<std::string> interface_towards(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  // Any port: connect() on a datagram socket sends nothing, it picks the route and source.
  if (::getaddrinfo(address.c_str(), "9", &hints, &res) != 0 || !res) return std::nullopt;
  std::optional<std::string> out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool routed = fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
                      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  if (!routed) return std::nullopt;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return std::nullopt;
  for (const ifaddrs* i = ifs; i && !out; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == local.sin_addr.s_addr)
      out = i->ifa_name;
  ::freeifaddrs(ifs);
  return out;
}

}  // namespace parlab::comm
