// bench_checkpoint: checkpoint save and load bandwidth for lab-mlp-sized training state, beside
// the raw sequential bandwidth of the same disk measured in the same run.
//
// State: lab-mlp (h 1024, f 4096, 8 blocks, 16 classes) has
//   P = L (2 h f + f + h) + C h + C = 8 (2·1024·4096 + 4096 + 1024) + 16·1024 + 16 = 67,166,224
// parameters; with AdamW that is params + exp_avg + exp_avg_sq = 3 P fp32 = 806 MB. The small
// case is a quarter of that (ffn 1024: P = 16.8 M, 201 MB).
//
// Goal (the lead's): save_bytes_per_s / raw_write_bytes_per_s >= 0.7, where raw write is
// write() of the same byte count in 16 MiB pieces + fsync, one thread, one file (like
// `dd bs=16M conv=fsync`). Load is compared with a raw sequential read() of a file whose pages
// were dropped from the cache first (posix_fadvise DONTNEED, no root needed); the checkpoint's
// files are dropped the same way before each load, so loads are cold too. A load hashes every
// file (verification) and copies each rank's share out of the same pass (ReadRequest), as a
// resuming DDP rank would before all-gathering the rest.
//
// Raw and checkpoint runs alternate within each repetition so a busy shared disk slows both
// alike; figures are medians over repetitions. Prints a table; never fails on timing.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "base/stats.h"
#include "base/units.h"

namespace {

namespace ck = parlab::checkpoint;
namespace fs = std::filesystem;
using parlab::units::format_bytes;
using parlab::units::format_bytes_per_s;
using parlab::units::format_seconds;

constexpr double kGoalRatio = 0.7;
constexpr size_t kChunkBytes = size_t{16} << 20;

// lab-mlp parameters and their AdamW moments, named as the trainer names them.
ck::TrainingState make_lab_mlp_state(int64_t hidden, int64_t ffn, int64_t blocks, int64_t classes) {
  ck::TrainingState s;
  s.step = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    for (const char* suffix : {"", ".exp_avg", ".exp_avg_sq"}) {
      ck::Tensor t{name + suffix, shape, {}};
      t.data.resize(static_cast<size_t>(ck::shape_numel(shape)));
      // Non-constant contents so no layer below can shortcut zero pages.
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i % 1021) * 0.5f;
      s.tensors.push_back(std::move(t));
    }
  };
  for (int64_t b = 0; b < blocks; ++b) {
    const std::string p = "blocks." + std::to_string(b);
    add(p + ".fc1.weight", {ffn, hidden});
    add(p + ".fc1.bias", {ffn});
    add(p + ".fc2.weight", {hidden, ffn});
    add(p + ".fc2.bias", {hidden});
  }
  add("head.weight", {classes, hidden});
  add("head.bias", {classes});
  s.metadata = {{"optimizer", {{"name", "adamw"}, {"step", 0}}}, {"model", "lab-mlp"}};
  return s;
}

using parlab::median;

// write() in 16 MiB pieces + fsync of `bytes` bytes taken cyclically from the state's tensors.
double raw_write_seconds(const fs::path& path, const ck::TrainingState& s, uint64_t bytes) {
  const double t0 = ck::now_seconds();
  ck::File f = ck::File::create(path);
  uint64_t left = bytes;
  while (left > 0) {
    for (const ck::Tensor& t : s.tensors) {
      auto b = std::as_bytes(std::span(t.data));
      for (size_t at = 0; at < b.size() && left > 0; at += kChunkBytes) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>({kChunkBytes, b.size() - at, left}));
        f.write_all(b.subspan(at, n));
        left -= n;
      }
      if (left == 0) break;
    }
  }
  f.fsync();
  return ck::now_seconds() - t0;
}

double raw_read_seconds(const fs::path& path) {
  { ck::File::open_read(path).drop_page_cache(); }
  std::vector<std::byte> buf(kChunkBytes);
  const double t0 = ck::now_seconds();
  ck::File f = ck::File::open_read(path);
  while (f.read_some(buf) > 0) {}
  return ck::now_seconds() - t0;
}

void drop_checkpoint_cache(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) ck::File::open_read(e.path()).drop_page_cache();
}

template <class F>
void run_ranks(int world, F&& fn) {
  ck::LocalGroup group(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) {
    ts.emplace_back([&, r] {
      auto c = group.member(r);
      fn(c);
    });
  }
  for (auto& t : ts) t.join();
}

struct Row {
  std::string state;
  int writers = 0;
  uint64_t bytes = 0;
  std::vector<double> save_s, raw_write_s, load_s, raw_read_s, ratio_w, ratio_r;
  std::vector<double> shard_write_s, shard_fsync_s, commit_s, verify_s, read_s;
};

void run_case(Row& row, const ck::TrainingState& s, const fs::path& work, int reps) {
  const fs::path root = work / ("ckpt-" + row.state + "-w" + std::to_string(row.writers));
  fs::remove_all(root);
  const int world = row.writers;
  for (int rep = 0; rep < reps; ++rep) {
    const int64_t step = rep + 1;
    ck::SaveResult saved;
    double t0 = ck::now_seconds();
    run_ranks(world, [&](ck::Coordinator& c) {
      const auto slices = ck::replica_share(s, world, c.rank());
      ck::SaveResult r = ck::save_checkpoint({root, 1}, step, slices, s.metadata, c);
      if (c.rank() == 0) saved = r;
    });
    const double save_s = ck::now_seconds() - t0;
    row.bytes = saved.total_bytes;
    const double raw_w = raw_write_seconds(work / "raw.bin", s, saved.total_bytes);

    // Destination buffers exist before a resume starts (the model is built first); touch them.
    std::vector<std::vector<std::vector<float>>> dst(static_cast<size_t>(world));
    std::vector<std::vector<ck::ReadRequest>> requests(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      for (const ck::TensorSlice& sl : ck::replica_share(s, world, r)) {
        dst[static_cast<size_t>(r)].emplace_back(sl.data.size(), 0.0f);
        requests[static_cast<size_t>(r)].push_back({sl.name, sl.begin_element, dst[static_cast<size_t>(r)].back()});
      }
    }
    drop_checkpoint_cache(saved.path);
    double verify_s = 0, read_s = 0;
    t0 = ck::now_seconds();
    run_ranks(world, [&](ck::Coordinator& c) {
      ck::LoadResult r = ck::load_checkpoint({root}, c, requests[static_cast<size_t>(c.rank())]);
      if (!r.checkpoint) throw parlab::RuntimeError("bench: load failed: " + r.summary());
      if (c.rank() == 0) {
        verify_s = r.timings.verify_seconds;
        read_s = r.timings.read_seconds;
      }
    });
    const double load_s = ck::now_seconds() - t0;
    const double raw_r = raw_read_seconds(work / "raw.bin");
    fs::remove(work / "raw.bin");

    row.save_s.push_back(save_s);
    row.raw_write_s.push_back(raw_w);
    row.ratio_w.push_back(raw_w / save_s);
    row.load_s.push_back(load_s);
    row.raw_read_s.push_back(raw_r);
    row.ratio_r.push_back(raw_r / load_s);
    row.shard_write_s.push_back(saved.timings.shard_write_seconds);
    row.shard_fsync_s.push_back(saved.timings.shard_fsync_seconds);
    row.commit_s.push_back(saved.timings.manifest_seconds + saved.timings.commit_seconds +
                           saved.timings.retention_seconds);
    row.verify_s.push_back(verify_s);
    row.read_s.push_back(read_s);
  }
  fs::remove_all(root);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Checkpoint save/load bandwidth vs raw disk bandwidth (lab-mlp + AdamW state)"};
  std::string dir = (fs::temp_directory_path() / "parlab-bench-checkpoint").string();
  std::vector<int> writers = {1, 4};
  int reps = 3;
  bool small_only = false;
  app.add_option("--dir", dir, "scratch directory on the disk to measure (removed afterwards)");
  app.add_option("--writers", writers, "writer counts (ranks as threads)");
  app.add_option("--reps", reps, "repetitions per case (medians are printed)")->check(CLI::PositiveNumber);
  app.add_flag("--small-only", small_only, "skip the 806 MB case");
  CLI11_PARSE(app, argc, argv);

  const fs::path work = fs::path(dir);
  fs::create_directories(work);
  struct Size {
    std::string name;
    int64_t ffn;
  };
  std::vector<Size> sizes = {{"quarter", 1024}, {"full", 4096}};
  if (small_only) sizes.resize(1);

  std::vector<Row> rows;
  for (const Size& size : sizes) {
    const ck::TrainingState s = make_lab_mlp_state(1024, size.ffn, 8, 16);
    for (int w : writers) {
      Row row;
      row.state = size.name;
      row.writers = w;
      run_case(row, s, work, reps);
      rows.push_back(std::move(row));
      std::fprintf(stderr, "done: %s state, %d writers\n", size.name.c_str(), w);
    }
  }
  fs::remove_all(work);

  std::printf(
      "checkpoint bandwidth, lab-mlp + AdamW state, medians of %d reps (GB = 1e9 B);\n"
      "ratio = median over reps of raw_seconds / checkpoint_seconds (same bytes, same rep)\n",
      reps);
  std::printf("%-8s %9s %3s | %10s %10s %6s %6s | %10s %10s %6s %6s\n", "state", "bytes", "W", "save", "raw write",
              "ratio", "goal", "load", "raw read", "ratio", "goal");
  for (const Row& r : rows) {
    const double b = static_cast<double>(r.bytes);
    const double rw = median(r.ratio_w), rr = median(r.ratio_r);
    std::printf("%-8s %9s %3d | %10s %10s %6.2f %6s | %10s %10s %6.2f %6s\n", r.state.c_str(), format_bytes(b).c_str(),
                r.writers, format_bytes_per_s(b / median(r.save_s)).c_str(),
                format_bytes_per_s(b / median(r.raw_write_s)).c_str(), rw, rw >= kGoalRatio ? ">=0.7 ok" : ">=0.7 MISS",
                format_bytes_per_s(b / median(r.load_s)).c_str(), format_bytes_per_s(b / median(r.raw_read_s)).c_str(),
                rr, rr >= kGoalRatio ? ">=0.7 ok" : ">=0.7 MISS");
  }
  std::printf(
      "\nphases (rank 0, medians): shard write+hash | shard fsync | manifest+rename+pointer+retention"
      " || load verify+copy | load read (other ranks' files)\n");
  for (const Row& r : rows) {
    std::printf("%-8s W=%d: %s | %s | %s || %s | %s\n", r.state.c_str(), r.writers,
                format_seconds(median(r.shard_write_s)).c_str(), format_seconds(median(r.shard_fsync_s)).c_str(),
                format_seconds(median(r.commit_s)).c_str(), format_seconds(median(r.verify_s)).c_str(),
                format_seconds(median(r.read_s)).c_str());
  }
  // What the save cost means for the checkpoint interval (Young/Daly), at a one-day MTBF.
  const Row& big = rows.back();
  const double cost = median(big.save_s);
  std::printf("\nYoung/Daly: a %s save taking %s with MTBF 24 h -> checkpoint every %s\n",
              format_bytes(static_cast<double>(big.bytes)).c_str(), format_seconds(cost).c_str(),
              format_seconds(ck::young_daly_interval_seconds(cost, 86400.0)).c_str());
  return 0;
}
