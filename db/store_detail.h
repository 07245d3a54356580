#pragma once
// Helpers shared by the ResultsStore source files; not part of the public API.
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "db/sqlite.h"
#include "db/transaction.h"

namespace parlab::db::detail {

// SQL for "now" in the schema's timestamp format; literal-concatenated into statements.
#define PARLAB_DB_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

// Runs `write` in its own BEGIN IMMEDIATE transaction committed at once, or inside the caller's
// transaction when one is open on the connection (the caller then decides when to commit).
// A lock timeout names `where`: the store function that wanted to write.
template <class Write>
auto write_scope(Connection& connection, Write&& write, std::source_location where = std::source_location::current()) {
  if (connection.in_transaction()) return write();
  Transaction tx(connection, where);
  if constexpr (std::is_void_v<decltype(write())>) {
    write();
    tx.commit();
  } else {
    auto result = write();
    tx.commit();
    return result;
  }
}

// One column into a record's field, converted by the field's type (narrow integers, a 0/1 flag,
// NULL as an empty optional).
inline void read_column(const Statement& s, int i, std::int64_t& v) { v = s.int64(i); }
inline void read_column(const Statement& s, int i, std::uint64_t& v) { v = static_cast<std::uint64_t>(s.int64(i)); }
inline void read_column(const Statement& s, int i, int& v) { v = static_cast<int>(s.int64(i)); }
inline void read_column(const Statement& s, int i, bool& v) { v = s.int64(i) != 0; }
inline void read_column(const Statement& s, int i, double& v) { v = s.real(i); }
inline void read_column(const Statement& s, int i, std::string& v) { v = s.text(i); }
inline void read_column(const Statement& s, int i, std::optional<std::int64_t>& v) { v = s.optional_int64(i); }
inline void read_column(const Statement& s, int i, std::optional<int>& v) {
  const auto x = s.optional_int64(i);
  v = x ? std::optional<int>(static_cast<int>(*x)) : std::nullopt;
}
inline void read_column(const Statement& s, int i, std::optional<double>& v) { v = s.optional_real(i); }
inline void read_column(const Statement& s, int i, std::optional<std::string>& v) { v = s.optional_text(i); }

// Columns first, first + 1, ... of the current row into `fields`, in order: a row reader names
// its fields once, in the order its SELECT names the columns.
template <class... Fields>
void read_columns(const Statement& s, int first, Fields&... fields) {
  int i = first;
  (read_column(s, i++, fields), ...);
}

// Every row of a bound statement through `read` (a row reader: const Statement& -> record).
template <class Read>
auto collect_rows(Statement& s, Read read) {
  std::vector<decltype(read(s))> rows;
  while (s.step()) rows.push_back(read(s));
  return rows;
}

// Parses a JSON column; the schema's json_valid CHECKs make failure a sign of a damaged file.
nlohmann::json parse_json_column(const std::string& text, std::string_view where);

}  // namespace parlab::db::detail
