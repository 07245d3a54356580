// Choosing Gloo's interface when the host name is useless: loopback names are recognised, and
// the interface towards an address is the one the kernel routes it through (checked against
// the host's own interface table, read independently with getifaddrs).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include "runtime/comm/route.h"

namespace parlab::comm {
namespace {

TEST(Route, LoopbackNamesAndAddresses) {
  EXPECT_TRUE(resolves_to_loopback("127.0.0.1"));
  EXPECT_TRUE(resolves_to_loopback("127.0.1.1"));
  EXPECT_TRUE(resolves_to_loopback("localhost"));
  EXPECT_FALSE(resolves_to_loopback("192.0.2.7"));  // TEST-NET-1: not loopback, resolves as itself
  EXPECT_FALSE(resolves_to_loopback("no-such-host.invalid"));
}

TEST(Route, LoopbackIsReachedThroughLo) {
  const auto i = interface_towards("127.0.0.1");
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(*i, "lo");
  EXPECT_FALSE(interface_towards("no-such-host.invalid").has_value());
}

// For every directly connected IPv4 subnet of this host (other than loopback), another address
// in it is reached through that subnet's interface.
TEST(Route, APeerOnASubnetIsReachedThroughItsInterface) {
  ifaddrs* ifs = nullptr;
  ASSERT_EQ(::getifaddrs(&ifs), 0);
  int checked = 0;
  for (const ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) continue;
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    const uint32_t m = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
    if ((a >> 24) == 127 || (~m) < 3) continue;  // loopback, or no room for another host
    uint32_t peer = (a & m) | (((a & ~m) + 1) & ~m);
    if (peer == a || (peer & ~m) == 0 || (peer & ~m) == ~m) peer = (a & m) | 1;
    if (peer == a) peer = (a & m) | 2;
    in_addr pa{htonl(peer)};
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &pa, text, sizeof text);
    const auto got = interface_towards(text);
    ASSERT_TRUE(got.has_value()) << text;
    EXPECT_EQ(*got, i->ifa_name) << "peer " << text;
    ++checked;
  }
  ::freeifaddrs(ifs);
  if (checked == 0) GTEST_SKIP() << "this host has no IPv4 subnet besides loopback";
}

}  // namespace
}  // namespace parlab::comm
