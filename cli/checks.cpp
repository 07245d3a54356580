#include "cli/checks.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <system_error>

#include "strategy/errors.h"

namespace parlab::cli {
namespace fs = std::filesystem;

std::string show(double v) { return fmt::format("{}", v); }

double positive(const std::string& flag, double v, double most) {
  if (!std::isfinite(v) || v <= 0 || v > most)
    throw ConfigError(flag, show(v), most < 1e300 ? "must be a number > 0 and <= " + show(most) : "must be a finite number > 0");
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
    throw ConfigError(flag, std::to_string(v), "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
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
    if (s.find('-') != std::string::npos) throw ConfigError(name, s, "must be an integer >= 0");
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
  if (!first_new.empty()) fs::remove_all(first_new, ec);
  if (!is_dir) throw ConfigError(flag, dir.string(), "is not a directory");
  if (!writable)
    throw ConfigError(flag, dir.string(), "is not writable: " + std::error_code(err, std::generic_category()).message());
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

}  // namespace parlab::cli
