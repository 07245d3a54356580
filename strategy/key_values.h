#pragma once
// Splitting "key=value,key=value" lists, the one spelling every command uses for plans
// (--plan), faults (--fault kind:...) and hand ledgers (--ledger-gb). Callers check the keys and
// word their own errors; this only splits (blank items are skipped, spaces around keys and values
// trimmed) and says which items lack an '='.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace parlab::strategy {

inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

struct KeyValue {
  std::string key, value;
  std::string item;         // the whole item as written (for error messages)
  bool has_equals = false;  // false: the item is not key=value
};

inline std::vector<KeyValue> split_key_values(std::string_view text) {
  std::vector<KeyValue> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    KeyValue kv;
    kv.item = item;
    const size_t eq = item.find('=');
    kv.has_equals = eq != std::string::npos && eq > 0;
    if (kv.has_equals) {
      kv.key = trim(std::string_view(item).substr(0, eq));
      kv.value = trim(std::string_view(item).substr(eq + 1));
    }
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace parlab::strategy
