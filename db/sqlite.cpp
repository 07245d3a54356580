#include "db/sqlite.h"

#include <sqlite3.h>

#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include "parlab/source_dir.h"

namespace parlab::db {

bool DbError::is_busy() const { return code_ == SQLITE_BUSY || code_ == SQLITE_LOCKED; }
bool DbError::is_constraint() const { return code_ == SQLITE_CONSTRAINT; }

namespace detail {

// Source paths are absolute in CMake builds; messages name files as the repository does.
std::string_view repo_relative(std::string_view file) {
#ifdef PARLAB_SOURCE_DIR
  const std::string_view root = PARLAB_SOURCE_DIR;
  if (file.substr(0, root.size()) == root) {
    file.remove_prefix(root.size());
    if (!file.empty() && file.front() == '/') file.remove_prefix(1);
  }
#endif
  return file;
}

std::string shorten(std::string_view text) {
  constexpr std::size_t kMax = 160;
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out.push_back(c);
  }
  if (out.size() > kMax) out = out.substr(0, kMax) + "...";
  return out;
}

void throw_sqlite_error(sqlite3* db, int rc, const char* what, const char* file, int line) {
  // Extended result codes are on, so rc is the extended code and its low byte the primary one.
  // The database's own path first: with several databases about, "file is not a database" alone
  // does not say which.
  const char* path = db ? sqlite3_db_filename(db, "main") : nullptr;
  std::string message = (path && *path ? std::string(path) + ": " : std::string()) + std::string(repo_relative(file)) +
                        ":" + std::to_string(line) + ": " + shorten(what) + ": " +
                        (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  throw DbError(std::move(message), rc & 0xff, rc);
}

}  // namespace detail

// ---- Statement -----------------------------------------------------------------------------

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Statement& Statement::bind_integer(int index, std::int64_t value) {
  PARLAB_SQLITE_CHECK(db_, sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  PARLAB_SQLITE_CHECK(db_, sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  PARLAB_SQLITE_CHECK(db_,
                      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  PARLAB_SQLITE_CHECK(db_, sqlite3_bind_null(stmt_, index));
  return *this;
}

bool Statement::step(Where where) {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  detail::throw_sqlite_error(db_, rc, sqlite3_sql(stmt_), where.file_name(), static_cast<int>(where.line()));
}

void Statement::run(Where where) {
  while (step(where)) {}
}

void Statement::step_one(Where where) {
  if (!step(where)) {
    throw DbError(std::string(detail::repo_relative(where.file_name())) + ":" + std::to_string(where.line()) +
                      ": expected one row, got none: " + sqlite3_sql(stmt_),
                  0, 0);
  }
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::text(int column) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return data ? std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))) : std::string();
}
std::optional<std::int64_t> Statement::optional_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}
std::optional<double> Statement::optional_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return real(column);
}
std::optional<std::string> Statement::optional_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}
std::string_view Statement::sql() const { return sqlite3_sql(stmt_); }

// ---- Connection ----------------------------------------------------------------------------

namespace {
bool is_memory(const std::filesystem::path& path) { return path == ":memory:"; }
}  // namespace

Connection::Connection(const std::filesystem::path& path, const ConnectionOptions& options) : path_(path) {
  if (!is_memory(path) && path.has_parent_path() && !options.read_only) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw DbError("cannot create the directory of " + path.string() + ": " + ec.message(), 0, 0);
    }
  }
  std::string name = path.string();
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (options.read_only && options.immutable) {
    std::string uri = "file:";
    for (const char c : name) {
      if (c == '%' || c == '?' || c == '#') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        uri += hex;
      } else {
        uri += c;
      }
    }
    name = uri + "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message =
        "cannot open " + path.string() + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw DbError(message, rc & 0xff, rc);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    PARLAB_SQLITE_CHECK(db_, sqlite3_busy_timeout(db_, static_cast<int>(options.busy_timeout.count())));
    exec_script("PRAGMA foreign_keys = ON");
    if (!is_memory(path) && !options.read_only) set_wal_mode(options.busy_timeout);
    // In WAL mode NORMAL loses nothing when a process dies; only a power cut can drop the last
    // commits. FULL would fsync every per-step commit of every worker.
    exec_script("PRAGMA synchronous = NORMAL");
  } catch (...) {
    finalize_all();
    sqlite3_close_v2(db_);
    throw;
  }
}

Connection::~Connection() {
  finalize_all();
  sqlite3_close_v2(db_);
}

void Connection::finalize_all() noexcept {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  cache_.clear();
}

// WAL lets readers (the GUI, reports) run while workers write, and makes commits cheap. The
// switch needs a moment of exclusive access, and the busy handler does not cover it, so several
// processes opening a fresh file at once retry here for up to the busy timeout.
void Connection::set_wal_mode(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      if (journal_mode_set_wal()) return;
    } catch (const DbError& e) {
      if (!e.is_busy() || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool Connection::journal_mode_set_wal() {
  Statement s = statement("PRAGMA journal_mode = WAL");
  s.step_one();
  const std::string mode = s.text(0);
  if (mode == "wal") return true;
  throw DbError(path_.string() + ": cannot use WAL journal mode (got '" + mode + "')", 0, 0);
}

Statement Connection::statement(std::string_view sql, std::source_location where) {
  const std::string key(sql);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    const int rc =
        sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
    if (rc != SQLITE_OK) {
      detail::throw_sqlite_error(db_, rc, key.c_str(), where.file_name(), static_cast<int>(where.line()));
    }
    if (tail != nullptr && std::string_view(tail).find_first_not_of(" \t\r\n;") != std::string_view::npos) {
      sqlite3_finalize(stmt);
      throw DbError("statement() takes one SQL statement; use exec_script for several: " + key, 0, 0);
    }
    it = cache_.emplace(key, stmt).first;
  } else if (sqlite3_stmt_busy(it->second)) {
    throw DbError("prepared statement is still in use (a result loop is open): " + key, 0, 0);
  }
  return Statement(db_, it->second);
}

void Connection::exec_script(std::string_view sql, std::source_location where) {
  const std::string script(sql);
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, script.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    const std::string text = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw DbError(std::string(detail::repo_relative(where.file_name())) + ":" + std::to_string(where.line()) + ": " +
                      path_.string() + ": " + text + " (in: " + detail::shorten(script) + ")",
                  rc & 0xff, sqlite3_extended_errcode(db_));
  }
}

int Connection::user_version() {
  Statement s = statement("PRAGMA user_version");
  s.step_one();
  return static_cast<int>(s.int64(0));
}

bool Connection::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::string Connection::journal_mode() {
  Statement s = statement("PRAGMA journal_mode");
  s.step_one();
  return s.text(0);
}

std::int64_t Connection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Connection::changes() const { return sqlite3_changes(db_); }

}  // namespace parlab::db
