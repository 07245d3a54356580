#pragma once
// Splitting "key=value,key=value" lists, the one spelling every command uses for plans
// (--plan), faults (--fault kind:...) and hand ledgers (--ledger-gb). Callers check the keys and
// word their own errors; this only splits (blank items are skipped, spaces around keys and values
// trimmed) and says which items lack an '='.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace parlab {

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

// The same for user input named `field` ("plan", "--ledger-gb"): a blank item ("dp=2,,tp=1") or a
// key given twice ("dp=1,dp=2", where the last would silently win) is a ConfigError.
inline std::vector<KeyValue> split_key_values_strict(std::string_view text, const std::string& field) {
  const std::string whole = trim(text);
  if (whole.empty()) return {};
  std::vector<KeyValue> out;
  size_t begin = 0, index = 0;
  for (;;) {
    const size_t comma = whole.find(',', begin);
    const std::string item =
        trim(std::string_view(whole).substr(begin, comma == std::string::npos ? comma : comma - begin));
    ++index;
    if (item.empty())
      throw ConfigError(
          field, whole,
          "item " + std::to_string(index) + " is empty; write key=value pairs separated by single commas");
    for (KeyValue& kv : split_key_values(item)) {
      for (const KeyValue& seen : out) {
        if (kv.has_equals && seen.key == kv.key)
          throw ConfigError(field + "." + kv.key, seen.value + ", then " + kv.value, "given twice; give each key once");
      }
      out.push_back(std::move(kv));
    }
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return out;
}

}  // namespace parlab
