#pragma once
// Which of this host's interfaces reaches a peer: what Gloo should listen on when the host name
// says nothing useful. In a container or a network namespace the host name often resolves to
// 127.0.0.1, and a rank that advertises it gives its peers "connect [127.0.0.1]: Connection
// refused"; the interface the kernel routes MASTER_ADDR through is the one they can reach.
#include <optional>
#include <string>

namespace parlab::comm {

// Whether every address `host` resolves to is a loopback one (127.0.0.0/8, ::1); false when it
// does not resolve.
bool resolves_to_loopback(const std::string& host);

// The interface (its name, "eth0", "veth1") the kernel would send a packet to `address` from,
// or nothing when `address` does not resolve or no route exists. Sends nothing: a UDP socket
// connect() only chooses the route.
std::optional<std::string> interface_towards(const std::string& address);

}  // namespace parlab::comm
