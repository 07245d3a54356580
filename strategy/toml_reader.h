#pragma once
// Reading TOML with errors that name the source, the key and what is allowed, and with unknown
// keys rejected instead of silently ignored. Used by every parser of user files (models,
// clusters, experiments).
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "base/errors.h"

namespace parlab::strategy {

// Parses TOML text; a syntax error becomes ConfigError("<source>:<line>:<col>", ...).
inline toml::table parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << source << ":" << e.source().begin.line << ":" << e.source().begin.column;
    throw ConfigError(where.str(), "(TOML)", std::string(e.description()));
  }
}

// Reads typed keys from one TOML table and remembers which keys it consumed, so anything left
// over is reported as an unknown key instead of being silently ignored.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string source, std::string prefix)
      : table_(table), source_(std::move(source)), prefix_(std::move(prefix)) {}

  std::string field(std::string_view key) const { return prefix_ + std::string(key); }

  [[noreturn]] void fail(std::string_view key, const std::string& value, const std::string& allowed) const {
    throw ConfigError(source_ + ": " + field(key), value, allowed);
  }

  const toml::node* find(std::string_view key) {
    used_.emplace_back(key);
    return table_.get(key);
  }

  std::optional<int64_t> integer(std::string_view key) {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<int64_t>()) return *v;
    fail(key, describe(*n), "must be an integer");
  }
  // A finite number: TOML's nan and inf are refused (no key of ours means them) except through
  // number_or_inf.
  std::optional<double> number(std::string_view key) {
    const auto v = number_or_inf(key);
    if (v && !std::isfinite(*v)) fail(key, describe(*find(key)), "must be a finite number");
    return v;
  }
  std::optional<double> number_or_inf(std::string_view key) {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (auto v = n->value<double>()) {
      if (std::isnan(*v)) fail(key, describe(*n), "must be a number");
      return *v;
    }
    fail(key, describe(*n), "must be a number");
  }
  // An integer in [lo, hi]: sizes such as hidden = 9223372036854775807 would overflow every
  // product computed from them.
  std::optional<int64_t> integer(std::string_view key, int64_t lo, int64_t hi) {
    const auto v = integer(key);
    if (v && (*v < lo || *v > hi))
      fail(key, std::to_string(*v), "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    return v;
  }
  // A number in [lo, hi] (`lo` excluded when `lo_open`); `inf_ok` also lets +inf through (the
  // ideal cluster's links).
  std::optional<double> number(std::string_view key, double lo, double hi, bool lo_open, bool inf_ok = false) {
    const auto v = inf_ok ? number_or_inf(key) : number(key);
    if (!v || (inf_ok && std::isinf(*v) && *v > 0)) return v;
    check_range(key, *find(key), *v, lo, hi, lo_open, inf_ok ? " (or inf)" : "");
    return v;
  }
  // An array of finite numbers, each in [lo, hi] (`lo` excluded when `lo_open`); an error names
  // the element: "intra.measured_all_reduce_busbw_gb_per_s[3]".
  std::optional<std::vector<double>> numbers(std::string_view key, double lo, double hi, bool lo_open) {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    const toml::array* a = n->as_array();
    if (!a) fail(key, describe(*n), "must be an array of numbers");
    std::vector<double> out;
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
      const auto v = (*a)[i].value<double>();
      if (!v || !std::isfinite(*v)) fail(at, describe((*a)[i]), "must be a finite number");
      check_range(at, (*a)[i], *v, lo, hi, lo_open, "");
      out.push_back(*v);
    }
    return out;
  }
  std::optional<std::string> string(std::string_view key) {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<std::string>()) return *v;
    fail(key, describe(*n), "must be a string");
  }
  std::optional<bool> boolean(std::string_view key) {
    const toml::node* n = find(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<bool>()) return *v;
    fail(key, describe(*n), "must be true or false");
  }
  const toml::table* table(std::string_view key) {
    const toml::node* n = find(key);
    if (!n) return nullptr;
    if (auto* t = n->as_table()) return t;
    fail(key, describe(*n), "must be a table [" + field(key) + "]");
  }

  // Throws for a sub-table not in `known`, before any required table is found missing: "[devise]"
  // must be named as unknown, not reported as "[device] is required".
  void reject_unknown_tables(const std::vector<std::string>& known, const std::string& allowed) const {
    for (const auto& [k, v] : table_) {
      if (v.is_table() && std::find(known.begin(), known.end(), k.str()) == known.end())
        throw ConfigError(source_ + ": [" + field(k.str()) + "]", "(table)", "unknown table; allowed: " + allowed);
    }
  }

  // Throws for the first key nobody asked for.
  void reject_unknown(const std::string& allowed) const {
    for (const auto& [k, v] : table_) {
      if (std::find(used_.begin(), used_.end(), k.str()) != used_.end()) continue;
      if (v.is_table())
        throw ConfigError(source_ + ": [" + field(k.str()) + "]", "(table)", "unknown table; allowed: " + allowed);
      fail(k.str(), describe(v), "unknown key; allowed: " + allowed);
    }
  }

  static std::string describe(const toml::node& n) {
    std::ostringstream o;
    n.visit([&](auto&& v) {
      if constexpr (toml::is_table<decltype(v)>)
        o << "(table)";
      else if constexpr (toml::is_array<decltype(v)>)
        o << "(array)";
      else
        o << v;
    });
    return o.str();
  }

 private:
  void check_range(std::string_view key, const toml::node& n, double v, double lo, double hi, bool lo_open,
                   const char* also) const {
    if (v >= lo && !(lo_open && v == lo) && v <= hi) return;
    std::ostringstream range;
    range << "must be a number " << (lo_open ? "> " : ">= ") << lo << " and <= " << hi << also;
    fail(key, describe(n), range.str());
  }

  const toml::table& table_;
  std::string source_, prefix_;
  std::vector<std::string> used_;
};

}  // namespace parlab::strategy
