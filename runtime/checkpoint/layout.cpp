#include "runtime/checkpoint/layout.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <system_error>

#include "runtime/checkpoint/file_io.h"
#include "base/errors.h"

namespace parlab::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "step-";
constexpr std::string_view kTmpSuffix = ".tmp";
constexpr std::string_view kDeletingSuffix = ".deleting";

std::optional<CheckpointEntry> parse_entry(const fs::path& path) {
  const std::string file_name = path.filename().string();
  std::string_view name = file_name;
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  EntryState state = EntryState::kCommitted;
  if (name.ends_with(kTmpSuffix)) {
    state = EntryState::kIncomplete;
    name.remove_suffix(kTmpSuffix.size());
  } else if (name.ends_with(kDeletingSuffix)) {
    state = EntryState::kDeleting;
    name.remove_suffix(kDeletingSuffix.size());
  }
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), step);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return CheckpointEntry{step, state, path};
}

int state_order(EntryState s) { return s == EntryState::kCommitted ? 0 : (s == EntryState::kIncomplete ? 1 : 2); }

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::vector<CheckpointEntry> list_checkpoints(const fs::path& root) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    if (auto entry = parse_entry(e.path())) out.push_back(std::move(*entry));
  }
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) {
    if (a.step != b.step) return a.step > b.step;
    return state_order(a.state) < state_order(b.state);
  });
  return out;
}

std::optional<std::string> read_pointer(const fs::path& root, const char* pointer) {
  std::error_code ec;
  if (!fs::is_regular_file(root / pointer, ec)) return std::nullopt;
  std::string text = read_small_file(root / pointer);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  auto entry = parse_entry(root / text);
  if (text.find('/') != std::string::npos || !entry || entry->state != EntryState::kCommitted) {
    return std::nullopt;
  }
  return text;
}

void write_pointer(const fs::path& root, const char* pointer, const std::string& dir_name) {
  atomic_write_file(root / pointer, dir_name + "\n");
}

void remove_checkpoint_dir(const fs::path& dir) {
  fs::path aside = dir;
  aside += kDeletingSuffix;
  std::error_code ec;
  fs::rename(dir, aside, ec);
  if (ec) throw CheckpointIoError("cannot rename " + dir.string() + " aside: " + ec.message());
  fsync_directory(dir.parent_path());
  fs::remove_all(aside, ec);
  if (ec) throw CheckpointIoError("cannot remove " + aside.string() + ": " + ec.message());
}

RetentionResult apply_retention(const fs::path& root, const RetentionPolicy& policy) {
  if (policy.keep_last < 1) {
    throw ConfigError("checkpoint.keep_last", std::to_string(policy.keep_last),
                      "must be >= 1 (the newest checkpoint is always kept)");
  }
  std::set<std::string> protect;
  for (const char* p : {kLatestPointer, kLastKnownGoodPointer}) {
    if (auto name = read_pointer(root, p)) protect.insert(*name);
  }
  RetentionResult result;
  int committed_seen = 0;
  for (const CheckpointEntry& e : list_checkpoints(root)) {
    if (e.state == EntryState::kCommitted) {
      ++committed_seen;
      if (committed_seen <= policy.keep_last || protect.count(e.path.filename().string())) continue;
      remove_checkpoint_dir(e.path);
    } else {
      std::error_code ec;
      fs::remove_all(e.path, ec);
      if (ec) throw CheckpointIoError("cannot remove " + e.path.string() + ": " + ec.message());
    }
    result.deleted.push_back(e.path);
  }
  if (!result.deleted.empty()) fsync_directory(root);
  return result;
}

}  // namespace parlab::checkpoint
