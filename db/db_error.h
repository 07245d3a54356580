#pragma once
// Typed errors of the results database and the checked-call macro used at the SQLite boundary.
#include <string>
#include <string_view>

#include "base/errors.h"

struct sqlite3;

namespace parlab::db {

// A SQLite call failed. The message reads
//   "db/results_store_write.cpp:120: INSERT INTO runs ...: CHECK constraint failed: kind IN (...)"
// i.e. where it happened, what was attempted and SQLite's own words (sqlite3_errmsg).
class DbError : public RuntimeError {
 public:
  DbError(std::string message, int code, int extended_code)
      : RuntimeError(std::move(message)), code_(code), extended_code_(extended_code) {}
  // SQLITE_CONSTRAINT, SQLITE_BUSY, ... (primary result code) and the extended one
  // (SQLITE_CONSTRAINT_CHECK, ...); both 0 when the error did not come from SQLite itself.
  int code() const { return code_; }
  int extended_code() const { return extended_code_; }
  bool is_busy() const;        // "database is locked": another writer held the lock too long
  bool is_constraint() const;  // a CHECK, NOT NULL, UNIQUE or FOREIGN KEY rule rejected a row

 private:
  int code_;
  int extended_code_;
};

// The database file was written by a newer parlab (its user_version is above ours), or is not a
// parlab database at all. Opening it would risk corrupting what it holds, so we refuse.
class SchemaError : public DbError {
 public:
  using DbError::DbError;
};

namespace detail {
[[noreturn]] void throw_sqlite_error(sqlite3* db, int rc, const char* what, const char* file, int line);
// `file` relative to the repository root when it lies inside it.
std::string_view repo_relative(std::string_view file);
// One line of at most 160 characters: whitespace runs collapsed, the rest cut off with "...".
std::string shorten(std::string_view text);
}  // namespace detail

}  // namespace parlab::db

// Checks a sqlite3_* call that returns SQLITE_OK on success; otherwise throws DbError naming
// file:line, the call and sqlite3_errmsg(handle).
#define PARLAB_SQLITE_CHECK(handle, call)                                                               \
  do {                                                                                                  \
    const int parlab_sqlite_rc_ = (call);                                                               \
    if (parlab_sqlite_rc_ != 0 /* SQLITE_OK */)                                                         \
      ::parlab::db::detail::throw_sqlite_error((handle), parlab_sqlite_rc_, #call, __FILE__, __LINE__); \
  } while (0)
