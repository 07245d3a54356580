#pragma once
// A thin RAII layer over the SQLite C API: one Connection per thread, prepared statements cached
// per connection, values always bound (never spliced into SQL text).
//
//   Connection conn("results/parlab.db", {});
//   conn.statement("INSERT INTO run_params(run_id, key, value) VALUES (?, ?, ?)")
//       .bind_all(run_id, "lr", "3e-4").run();
//   auto q = conn.statement("SELECT key, value FROM run_params WHERE run_id = ?");
//   q.bind_all(run_id);
//   while (q.step()) use(q.text(0), q.text(1));
#include <chrono>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <unordered_map>

#include "db/db_error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace parlab::db {

struct ConnectionOptions {
  // How long a writer waits for another process's write transaction before failing with
  // "database is locked". Workers commit every step, so contention windows are short.
  std::chrono::milliseconds busy_timeout{10'000};
  // Open an existing file for reading only: no file or directory is created, the journal mode
  // is left as it is. A read-only file (or disk) can still be listed and compared.
  bool read_only = false;
  // With read_only: promise SQLite that nobody writes the file (SQLite's immutable=1), which is
  // what lets it read a WAL database on read-only media, where it cannot create the -shm index.
  bool immutable = false;
};

// A cached prepared statement lent out for one use. Rows come from step(); columns are 0-based,
// parameters 1-based (SQLite's conventions). On destruction the statement is reset and its
// bindings cleared, so the cache hands it out clean next time.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  // Integers of any width (bool binds 0/1). A uint64_t above INT64_MAX keeps its bit pattern
  // (SQLite integers are signed 64-bit); read it back with static_cast<std::uint64_t>.
  template <std::integral T>
  Statement& bind(int index, T value) {
    return bind_integer(index, static_cast<std::int64_t>(value));
  }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, std::nullopt_t);
  template <class T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }
  // Binds the arguments to parameters 1, 2, 3, ... in order.
  template <class... Args>
  Statement& bind_all(const Args&... args) {
    int index = 0;
    (bind(++index, args), ...);
    return *this;
  }

  // Advances to the next row: true when a row is ready, false when the statement is done.
  // Errors name `where` (the caller's file:line), the SQL and sqlite3_errmsg.
  using Where = std::source_location;
  bool step(Where where = Where::current());
  // Runs a statement that returns no rows (INSERT/UPDATE/DELETE without RETURNING).
  void run(Where where = Where::current());
  // Runs a statement expected to return exactly one row and leaves it ready for the getters;
  // throws DbError when there is none.
  void step_one(Where where = Where::current());

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::optional<std::int64_t> optional_int64(int column) const;
  std::optional<double> optional_real(int column) const;
  std::optional<std::string> optional_text(int column) const;

  std::string_view sql() const;

 private:
  Statement& bind_integer(int index, std::int64_t value);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// One open database handle: the pragmas every parlab connection needs (WAL, busy timeout,
// foreign keys) and a cache of prepared statements keyed by their SQL text. Not thread-safe:
// use one Connection per thread; SQLite's locking makes many processes and threads safe.
class Connection {
 public:
  // Opens (creating if missing) the file at `path`; ":memory:" opens a private in-memory
  // database. Parent directories are created. Throws DbError.
  Connection(const std::filesystem::path& path, const ConnectionOptions& options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // A cached prepared statement for `sql`. `sql` must be one statement with `?` parameters for
  // every value; it is compiled the first time and reused afterwards.
  Statement statement(std::string_view sql, std::source_location where = std::source_location::current());
  // Runs a script of several statements without values (migrations, pragmas).
  void exec_script(std::string_view sql, std::source_location where = std::source_location::current());

  int user_version();
  // True while a transaction is open on this connection.
  bool in_transaction() const;
  // "wal" for a file database; "memory" for ":memory:".
  std::string journal_mode();
  std::int64_t last_insert_rowid() const;
  int changes() const;

  const std::filesystem::path& path() const { return path_; }
  // For the rare caller that needs the C API (tests inspecting pragmas).
  sqlite3* handle() const { return db_; }

 private:
  void set_wal_mode(std::chrono::milliseconds timeout);
  bool journal_mode_set_wal();
  void finalize_all() noexcept;

  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace parlab::db
