// Retention keeps the newest K checkpoints, the last one that passed verification, and whatever
// `latest` names; it removes torn and half-deleted leftovers.
#include <gtest/gtest.h>

#include <set>

#include "runtime/checkpoint/checkpoint.h"
#include "tests/runtime/checkpoint/test_util.h"

namespace parlab::checkpoint {
namespace {

using testing::make_state;
using testing::ScratchDir;

std::set<std::string> dirs_in(const std::filesystem::path& root) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (e.is_directory()) out.insert(e.path().filename().string());
  }
  return out;
}

void save(const std::filesystem::path& root, int64_t step, int keep_last) {
  save_checkpoint({root, keep_last, {}}, make_state(step));
}

TEST(Retention, KeepsTheNewestK) {
  ScratchDir dir;
  for (int64_t step : {10, 20, 30, 40, 50}) save(dir.path(), step, 2);
  EXPECT_EQ(dirs_in(dir.path()), (std::set<std::string>{"step-000040", "step-000050"}));
}

TEST(Retention, KeepsTheLastKnownGoodBeyondK) {
  ScratchDir dir;
  save(dir.path(), 10, 2);
  ASSERT_EQ(load_checkpoint({dir.path()}).checkpoint->step(), 10);  // verifies 10
  for (int64_t step : {20, 30, 40}) save(dir.path(), step, 2);
  // Newest two are 30 and 40; 10 survives as last-known-good; 20 goes.
  EXPECT_EQ(dirs_in(dir.path()), (std::set<std::string>{"step-000010", "step-000030", "step-000040"}));

  // Once a newer checkpoint verifies, the old last-known-good is no longer special.
  ASSERT_EQ(load_checkpoint({dir.path()}).checkpoint->step(), 40);
  save(dir.path(), 50, 2);
  EXPECT_EQ(dirs_in(dir.path()), (std::set<std::string>{"step-000040", "step-000050"}));
}

TEST(Retention, NeverDeletesWhatLatestNames) {
  ScratchDir dir;
  for (int64_t step : {10, 20, 30, 40}) save(dir.path(), step, 10);
  write_pointer(dir.path(), kLatestPointer, "step-000020");  // e.g. an operator's rollback
  const RetentionResult r = apply_retention(dir.path(), {1});
  EXPECT_EQ(dirs_in(dir.path()), (std::set<std::string>{"step-000020", "step-000040"}));
  EXPECT_EQ(r.deleted.size(), 2u);
}

TEST(Retention, RemovesTornAndHalfDeletedLeftovers) {
  ScratchDir dir;
  save(dir.path(), 10, 3);
  std::filesystem::create_directories(dir.path() / "step-000020.tmp");
  std::filesystem::create_directories(dir.path() / "step-000005.deleting");
  std::filesystem::create_directories(dir.path() / "notes");  // not ours: left alone
  save(dir.path(), 30, 3);
  EXPECT_EQ(dirs_in(dir.path()), (std::set<std::string>{"notes", "step-000010", "step-000030"}));
}

TEST(Retention, RejectsKeepingNothing) {
  ScratchDir dir;
  EXPECT_THROW(apply_retention(dir.path(), {0}), ConfigError);
  EXPECT_THROW(save(dir.path(), 1, 0), ConfigError);
}

TEST(Layout, ListsNewestFirstAndParsesNames) {
  ScratchDir dir;
  for (const char* d :
       {"step-000010", "step-1000000", "step-000020.tmp", "step-000020", "step-x", "step-", "steps-000001"}) {
    std::filesystem::create_directories(dir.path() / d);
  }
  const auto entries = list_checkpoints(dir.path());
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].step, 1000000);
  EXPECT_EQ(entries[1].step, 20);
  EXPECT_EQ(entries[1].state, EntryState::kCommitted);
  EXPECT_EQ(entries[2].step, 20);
  EXPECT_EQ(entries[2].state, EntryState::kIncomplete);
  EXPECT_EQ(entries[3].step, 10);
  EXPECT_EQ(step_dir_name(120), "step-000120");
  EXPECT_EQ(step_dir_name(1234567), "step-1234567");
}

}  // namespace
}  // namespace parlab::checkpoint
