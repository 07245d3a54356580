#pragma once
// Text from outside (a damaged file, a parser's message quoting the bytes it read) made safe to
// print and to carry in JSON: every byte outside printable ASCII becomes \xNN. Left raw, a
// non-UTF-8 byte would make every later JSON message that carries the text throw.
#include <cstdio>
#include <string>
#include <string_view>

namespace parlab {

inline std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      out += hex;
    }
  }
  return out;
}

}  // namespace parlab
