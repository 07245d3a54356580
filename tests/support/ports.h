#pragma once
// Test support: a loopback TCP port nobody listens on right now -- the kernel's pick for a socket
// bound to port 0 and closed at once. (Another process could take it before the test binds it;
// on a test machine that race is rare, and the test then fails loudly rather than passing.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace parlab::testing {

inline int unused_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("could not bind a loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace parlab::testing
