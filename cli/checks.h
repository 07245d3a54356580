#pragma once
// Flag values checked at the edge, before any work or process starts. Each check throws
// ConfigError(flag, value, allowed): one line naming the flag, the value given and what is allowed
// (exit 2 from main). The libraries take 0 or -1 as "the default" in places, so a value the user
// typed must be checked here, where it is still known to have been typed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <string>

#include "db/results_store.h"

namespace parlab::cli {

// A double as the user would read it back: "nan", "inf", "-1", "1e+308".
std::string show(double v);

// finite and > 0 (and <= `most` when given)
double positive(const std::string& flag, double v, double most = 1e300);
// finite and >= `least` (and <= `most`)
double at_least(const std::string& flag, double v, double least, double most = 1e300);
// seconds for a std::chrono::milliseconds: finite, > 0 (or >= 0 with `zero_ok`), at most 30 days
double seconds_flag(const std::string& flag, double v, bool zero_ok = false);
// an integer in [lo, hi]
int64_t in_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi);

// Whether `cmd`'s option `name` ("--lr") was on the command line.
bool given(const CLI::App& cmd, const std::string& name);
// CLI11 reads "-1" (and anything above 2^64-1) into an unsigned option as 2^64-1: refuse both.
void refuse_negative_unsigned(const CLI::App& cmd, const std::string& name);

// A directory a command will write into: not empty, creatable and writable (what the check
// creates it removes again).
void writable_directory(const std::string& flag, const std::filesystem::path& dir);

// A results database path: not empty, not a directory, and for `must_exist` an existing file;
// otherwise its parent directory must exist (a typo must not create directories).
void database_path(const std::string& flag, const std::string& path, bool must_exist);

// The results database `path` of `flag`, opened before any work: read-only for commands that only
// read (a read-only file or disk still lists and compares). A file SQLite or parlab cannot use
// (corrupt, truncated, not a database, newer schema, read-only for a writer) is refused as
// ConfigError naming the flag, the path and the reason.
db::ResultsStore open_results(const std::string& flag, const std::string& path, bool read_only);

}  // namespace parlab::cli
