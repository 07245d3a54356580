#include "cli/checks.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <system_error>

#include "db/db_error.h"
#include "base/errors.h"

namespace parlab::cli {
namespace fs = std::filesystem;

std::string show(double v) { return fmt::format("{}", v); }

double positive(const std::string& flag, double v, double most) {
  if (!std::isfinite(v) || v <= 0 || v > most)
    throw ConfigError(flag, show(v),
                      most < 1e300 ? "must be a number > 0 and <= " + show(most) : "must be a finite number > 0");
  return v;
}

double at_least(const std::string& flag, double v, double least, double most) {
  if (!std::isfinite(v) || v < least || v > most)
    throw ConfigError(flag, show(v),
                      "must be a finite number >= " + show(least) + (most < 1e300 ? " and <= " + show(most) : ""));
  return v;
}

double seconds_flag(const std::string& flag, double v, bool zero_ok) {
  constexpr double kMostSeconds = 30 * 86400.0;  // beyond this a millisecond count is no longer meant
  if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0) || v > kMostSeconds)
    throw ConfigError(flag, show(v),
                      std::string("must be a number of seconds ") + (zero_ok ? ">= 0" : "> 0") + " and at most " +
                          show(kMostSeconds) + " (30 days)");
  return v;
}

int64_t in_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw ConfigError(flag, std::to_string(v),
                      "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

bool given(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = cmd.get_option_no_throw(name);
  return o != nullptr && o->count() > 0;
}

void refuse_negative_unsigned(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = cmd.get_option_no_throw(name);
  if (o == nullptr) return;
  for (const std::string& s : o->results()) {
    // strtoull wraps "-1" to 2^64-1 and clamps what is too big to 2^64-1; CLI11 takes both.
    errno = 0;
    (void)std::strtoull(s.c_str(), nullptr, 0);
    if (s.find('-') != std::string::npos || errno == ERANGE)
      throw ConfigError(name, s, "must be an integer from 0 to 18446744073709551615");
  }
}

void writable_directory(const std::string& flag, const fs::path& dir) {
  if (dir.empty()) throw ConfigError(flag, "\"\"", "must name a directory");
  std::error_code ec;
  // The directories this check creates are removed again: a refused command leaves nothing.
  fs::path first_new;
  for (fs::path p = fs::absolute(dir, ec); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    first_new = p;
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError(flag, dir.string(), "cannot create it: " + ec.message());
  const bool is_dir = fs::is_directory(dir, ec);
  const bool writable = ::access(dir.c_str(), W_OK | X_OK) == 0;
  const int err = errno;
  // Only what is still empty, deepest first: another process may have started using the
  // directory meanwhile (ranks of one job launched together), and its files must stay.
  if (!first_new.empty()) {
    for (fs::path p = fs::absolute(dir, ec); !p.empty(); p = p.parent_path()) {
      if (!fs::remove(p, ec) || p == first_new || p == p.parent_path()) break;
    }
  }
  if (!is_dir) throw ConfigError(flag, dir.string(), "is not a directory");
  if (!writable)
    throw ConfigError(flag, dir.string(),
                      "is not writable: " + std::error_code(err, std::generic_category()).message());
}

void database_path(const std::string& flag, const std::string& path, bool must_exist) {
  if (path.empty()) throw ConfigError(flag, "\"\"", "must name a results database file");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ConfigError(flag, path, "is a directory; give a database file");
  if (must_exist) {
    if (!fs::exists(path, ec)) throw ConfigError(flag, path, "no such database (run an experiment first)");
    return;
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw ConfigError(flag, path, "its directory " + parent.string() + " does not exist");
}

namespace {

// What a SQLite failure at open means for the user (primary result codes; the path is in the
// flag's value, the SQL beside it would only distract).
std::string sqlite_reason(const db::DbError& e) {
  switch (e.code()) {
    case 5:
      return "it is locked by another process (SQLITE_BUSY)";
    case 8:
      return "it is read-only (SQLITE_READONLY)";
    case 10:
      return "a disk I/O error (SQLITE_IOERR)";
    case 11:
      return "it is damaged or truncated (SQLITE_CORRUPT)";
    case 13:
      return "the disk is full (SQLITE_FULL)";
    case 14:
      return "it cannot be opened (SQLITE_CANTOPEN)";
    case 26:
      return "it is not a SQLite database (SQLITE_NOTADB)";
    default:
      return e.what();
  }
}

}  // namespace

db::ResultsStore open_results(const std::string& flag, const std::string& path, bool read_only) {
  database_path(flag, path, read_only);
  if (!read_only) {
    const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
    std::error_code ec;
    const bool exists = fs::exists(path, ec);
    if ((exists && ::access(path.c_str(), W_OK) != 0) || ::access(parent.c_str(), W_OK) != 0)
      throw ConfigError(flag, path,
                        "is read-only (" + std::error_code(errno, std::generic_category()).message() +
                            "); commands that only read it (experiment list, compare) still can");
  }
  try {
    db::OpenOptions options;
    options.read_only = read_only;
    db::ResultsStore store = db::ResultsStore::open(path, options);
    (void)store.list_experiments();  // a read, so a damaged file is found here and not mid-run
    return store;
  } catch (const db::DbError& e) {
    throw ConfigError(flag, path,
                      std::string(read_only ? "cannot be read" : "cannot be opened for writing") +
                          " as a results database: " + sqlite_reason(e));
  }
}

}  // namespace parlab::cli
