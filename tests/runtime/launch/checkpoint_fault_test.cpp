// Checkpoint faults that used to stop a run, through the real CLI with real processes: a
// manifest.json holding bytes that are not UTF-8 (or not JSON at all) and a disk that fills up
// during a save. Either way the run must go on from the last good checkpoint and end in exactly
// the uninterrupted run's state (its final-state hash), and a full disk must be reported as what
// it is, at the step it happened, with no partial save left holding the space.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "cli_fixture.h"

namespace parlab::launch {
namespace {

class CheckpointFaultTest : public CliTest {
 protected:
  // `parlab train` of the tiny model on 2 workers, a checkpoint every 3 steps (and at the last).
  ExitStatus train(const fs::path& run_dir, int steps, std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"train",
                                     "--nproc",
                                     "2",
                                     "--model",
                                     (dir_ / "tiny.toml").string(),
                                     "--plan",
                                     "gbs=16,mb=4",
                                     "--steps",
                                     std::to_string(steps),
                                     "--checkpoint-every",
                                     "3",
                                     "--seed",
                                     "5",
                                     "--run-dir",
                                     run_dir.string(),
                                     "--timeout",
                                     "20"};
    args.insert(args.end(), extra.begin(), extra.end());
    return parlab(args, out);
  }
  std::string reference_hash() {
    std::string out;
    EXPECT_TRUE(train(dir_ / "reference", 8, out).ok()) << out;
    return final_hash("reference");
  }
  static std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write_all(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }
  // Trains 6 steps (checkpoints 3 and 6), lets `damage` spoil step 6's manifest, trains on to 8.
  void expect_resume_past_damaged_manifest(const std::string& run, const std::string& want_hash,
                                           const std::function<std::string(std::string)>& damage) {
    std::string out;
    ASSERT_TRUE(train(dir_ / run, 6, out).ok()) << out;
    const fs::path manifest = dir_ / run / "checkpoints" / "step-000006" / "manifest.json";
    write_all(manifest, damage(read_all(manifest)));
    const ExitStatus st = train(dir_ / run, 8, out);
    ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
    EXPECT_EQ(out.find("unexpected error"), std::string::npos) << out;
    EXPECT_NE(out.find("resumed from step 3 (" + (dir_ / run / "checkpoints" / "step-000003").string() +
                       "); skipped step 6: manifest.json is not valid JSON"),
              std::string::npos)
        << out;
    EXPECT_EQ(final_hash(run), want_hash);
  }
};

TEST_F(CheckpointFaultTest, AManifestWithANonUtf8ByteIsABadCheckpointNotACrash) {
  const std::string want = reference_hash();
  // A 0xFF inside a JSON string: the parser's message quotes it back.
  expect_resume_past_damaged_manifest("utf8", want, [](std::string m) {
    const size_t at = m.find("parlab-checkpoint");
    EXPECT_NE(at, std::string::npos);
    m[at] = '\xff';
    return m;
  });
  // Random bytes from the first to the last.
  expect_resume_past_damaged_manifest("random", want, [](std::string m) {
    std::mt19937 gen(7);
    for (char& c : m) c = static_cast<char>(gen() & 0xff);
    m[0] = '\xfe';  // never a valid first byte of a JSON text
    return m;
  });
}

// A 1 MiB tmpfs as the run directory's disk. Mounting needs root (CAP_SYS_ADMIN); RLIMIT_FSIZE is
// no substitute: it kills the writer with SIGXFSZ instead of failing the write with ENOSPC.
class SmallDisk {
 public:
  explicit SmallDisk(const fs::path& where) : path_(where) {
    fs::create_directories(path_);
    if (::geteuid() != 0) {
      why_not_ = "mounting a small tmpfs to fill needs root";
    } else if (::mount("parlab-full-disk", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0) {
      why_not_ = std::string("cannot mount a 1 MiB tmpfs: ") + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  const std::string& why_not() const { return why_not_; }
  uint64_t free_bytes() const {
    struct statvfs s {};
    return ::statvfs(path_.c_str(), &s) == 0 ? static_cast<uint64_t>(s.f_bavail) * s.f_frsize : 0;
  }
  // Fills the disk until `leave` bytes are free.
  void fill_leaving(uint64_t leave) {
    const uint64_t n = free_bytes() > leave ? free_bytes() - leave : 0;
    std::ofstream(path_ / "filler", std::ios::binary) << std::string(n, '\0');
  }
  void empty_filler() { fs::remove(path_ / "filler"); }

 private:
  fs::path path_;
  bool mounted_ = false;
  std::string why_not_;
};

TEST_F(CheckpointFaultTest, AFullDiskIsReportedCleanedUpAndResumedFromTheLastGoodCheckpoint) {
  SmallDisk disk(dir_ / "disk");
  if (!disk.why_not().empty()) GTEST_SKIP() << disk.why_not();
  const std::string want = reference_hash();
  const fs::path run = dir_ / "disk" / "run";
  const fs::path checkpoints = run / "checkpoints";
  std::string out;
  ASSERT_TRUE(train(run, 3, out).ok()) << out;
  // One checkpoint of the tiny model is about 115 KB: 60 KB free lets step 6's save start and fail.
  disk.fill_leaving(60 * 1024);

  ExitStatus st = train(run, 8, out, {"--max-restarts", "1"});
  EXPECT_TRUE(st.exited) << st.describe() << "\n" << out;  // an exit code, not SIGABRT
  EXPECT_EQ(st.code, 1) << out;
  EXPECT_EQ(out.find("SIGABRT"), std::string::npos) << out;
  // The cause and the step, and the restart went back to the last good checkpoint.
  EXPECT_NE(out.find("exited with code 2 at step 6"), std::string::npos) << out;
  EXPECT_NE(out.find("step-000006.tmp/rank-0000"), std::string::npos) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("the last good checkpoint is " + (checkpoints / "step-000003").string()), std::string::npos)
      << out;
  // The partial save gave its space back.
  EXPECT_FALSE(fs::exists(checkpoints / "step-000006.tmp"));
  EXPECT_GE(disk.free_bytes(), 40u * 1024) << "the failed save still holds the disk";

  // With space again, the same command resumes from step 3 and ends bit-identical.
  disk.empty_filler();
  st = train(run, 8, out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  EXPECT_NE(out.find("resumed from step 3 (" + (checkpoints / "step-000003").string() + ")"), std::string::npos) << out;
  EXPECT_EQ(final_hash("disk/run"), want);
}

}  // namespace
}  // namespace parlab::launch
