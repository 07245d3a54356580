#include "runtime/checkpoint/save.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <system_error>

#include "parlab/version.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/layout.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/safetensors.h"

namespace parlab::checkpoint {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// After a collective exchange every rank knows who failed. Each failing rank rethrows its own
// exception; the others throw one error naming the first failing rank, so all ranks leave the
// save at the same point and nobody waits for a peer that will never arrive.
void raise_if_any_failed(const std::vector<json>& reports, const std::exception_ptr& mine, const char* phase) {
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!reports[r].contains("error")) continue;
    if (mine) std::rethrow_exception(mine);
    throw CheckpointSaveError("checkpoint save failed in " + std::string(phase) + " on rank " + std::to_string(r) +
                              ": " + reports[r]["error"].get<std::string>());
  }
}

std::vector<json> all_gather_json(Coordinator& coord, const json& mine) {
  std::vector<json> out;
  for (const std::string& s : coord.all_gather(mine.dump())) out.push_back(json::parse(s));
  return out;
}

void check_slices(std::span<const TensorSlice> slices) {
  std::set<std::string> seen;
  for (const TensorSlice& s : slices) {
    if (!seen.insert(s.name).second) {
      throw ConfigError("checkpoint slice " + s.name, "given twice", "at most one slice per tensor per rank");
    }
    const int64_t numel = shape_numel(s.global_shape);
    const int64_t end = s.begin_element + static_cast<int64_t>(s.data.size());
    if (s.begin_element < 0 || end > numel) {
      throw ConfigError("checkpoint slice " + s.name,
                        "[" + std::to_string(s.begin_element) + ", " + std::to_string(end) + ")",
                        "must lie in [0, " + std::to_string(numel) + ") for shape " + shape_to_string(s.global_shape));
    }
  }
}

// Phase 2: this rank's shard file. Returns the descriptor every rank will see.
json write_shard(const SaveOptions& o, const fs::path& tmp_dir, int64_t step, std::span<const TensorSlice> slices,
                 Coordinator& coord, SaveTimings& t) {
  check_slices(slices);
  const int rank = coord.rank();
  std::vector<TensorView> views;
  json slices_j = json::array(), index = json::object();
  for (const TensorSlice& s : slices) {
    const int64_t count = static_cast<int64_t>(s.data.size());
    slices_j.push_back(
        {{"name", s.name}, {"shape", s.global_shape}, {"begin", s.begin_element}, {"end", s.begin_element + count}});
    if (count == 0) continue;
    const bool whole = count == shape_numel(s.global_shape);
    views.push_back(TensorView::f32(s.name, whole ? s.global_shape : std::vector<int64_t>{count}, s.data));
    index[s.name] = {s.begin_element, s.begin_element + count};
  }
  const std::map<std::string, std::string> meta = {{"format", "parlab-checkpoint-shard"},
                                                   {"step", std::to_string(step)},
                                                   {"rank", std::to_string(rank)},
                                                   {"world_size", std::to_string(coord.world_size())},
                                                   {"element_ranges", index.dump()}};

  SafetensorsWriteOptions wo;
  wo.fsync = false;  // timed separately below
  wo.max_chunk_bytes = o.max_chunk_bytes;
  bool mid_fired = false;
  if (o.hook) {
    wo.on_progress = [&](uint64_t written, uint64_t total) {
      if (!mid_fired && 2 * written >= total) {
        mid_fired = true;
        o.hook(SavePhase::kMidShardWrite, rank);
      }
    };
  }
  const std::string name = shard_file_name(rank);
  double t0 = now_seconds();
  const SafetensorsWriteResult w = write_safetensors(tmp_dir / name, views, meta, wo);
  t.shard_write_seconds = now_seconds() - t0;
  t0 = now_seconds();
  File::open_read(tmp_dir / name).fsync();
  t.shard_fsync_seconds = now_seconds() - t0;
  if (o.hook) o.hook(SavePhase::kAfterShardWrite, rank);
  return {
      {"file", name}, {"bytes", w.file_bytes}, {"xxh3_64", hash_to_hex(w.xxh3_64)}, {"slices", std::move(slices_j)}};
}

// Rank 0, before phase 4: the manifest from every rank's shard descriptor.
Manifest assemble_manifest(int64_t step, const std::vector<json>& shards, const json& metadata) {
  Manifest m;
  m.parlab_version = kVersion;
  m.step = step;
  m.world_size = static_cast<int>(shards.size());
  m.metadata = metadata;
  std::map<std::string, size_t> where;  // tensor name -> index, in order of first appearance
  for (size_t r = 0; r < shards.size(); ++r) {
    const json& d = shards[r];
    m.files.push_back(
        {d["file"].get<std::string>(), d["bytes"].get<uint64_t>(), hash_from_hex(d["xxh3_64"].get<std::string>())});
    for (const json& s : d["slices"]) {
      const std::string name = s["name"].get<std::string>();
      const auto shape = s["shape"].get<std::vector<int64_t>>();
      auto [it, fresh] = where.try_emplace(name, m.tensors.size());
      if (fresh) m.tensors.push_back({name, shape, {}});
      ManifestTensor& mt = m.tensors[it->second];
      if (mt.shape != shape) {
        throw CheckpointSaveError("ranks disagree on the shape of '" + name + "': " + shape_to_string(mt.shape) +
                                  " vs " + shape_to_string(shape) + " (rank " + std::to_string(r) + ")");
      }
      const ElementRange range{s["begin"].get<int64_t>(), s["end"].get<int64_t>()};
      if (range.count() > 0) mt.pieces.push_back({r, range});
    }
  }
  for (ManifestTensor& mt : m.tensors) {
    std::sort(mt.pieces.begin(), mt.pieces.end(),
              [](const TensorPiece& a, const TensorPiece& b) { return a.range.begin < b.range.begin; });
  }
  try {
    m.validate();  // every tensor tiled exactly by the ranks' slices
  } catch (const ManifestError& e) {
    throw CheckpointSaveError(std::string("the ranks' slices do not form a checkpoint: ") + e.what());
  }
  return m;
}

// Rank 0, phases 4-7. Fills the commit timings and the outcome that every rank will receive.
json commit(const SaveOptions& o, const fs::path& tmp_dir, const fs::path& final_dir, int64_t step,
            const std::vector<json>& shards, const json& metadata, SaveTimings& t) {
  auto hook = [&](SavePhase p) {
    if (o.hook) o.hook(p, 0);
  };
  hook(SavePhase::kBeforeManifest);
  double t0 = now_seconds();
  const Manifest m = assemble_manifest(step, shards, metadata);
  fsync_directory(tmp_dir);  // the shard files' directory entries
  const std::string text = m.to_json().dump(2) + "\n";
  {
    File f = File::create(tmp_dir / kManifestFileName);
    f.write_all(std::as_bytes(std::span(text.data(), text.size())));
    f.fsync();
  }
  fsync_directory(tmp_dir);
  t.manifest_seconds = now_seconds() - t0;

  hook(SavePhase::kBeforeRename);
  t0 = now_seconds();
  // Saving a step again (after a rollback) replaces the old directory of that step.
  if (fs::exists(final_dir)) remove_checkpoint_dir(final_dir);
  std::error_code ec;
  fs::rename(tmp_dir, final_dir, ec);
  if (ec)
    throw CheckpointIoError("cannot rename " + tmp_dir.string() + " to " + final_dir.string() + ": " + ec.message());
  fsync_directory(o.root);
  hook(SavePhase::kBeforePointerUpdate);
  write_pointer(o.root, kLatestPointer, final_dir.filename().string());
  t.commit_seconds = now_seconds() - t0;
  hook(SavePhase::kAfterPointerUpdate);

  json out = {{"total_bytes", m.total_file_bytes() + text.size()},
              {"manifest_seconds", t.manifest_seconds},
              {"commit_seconds", t.commit_seconds},
              {"deleted", json::array()},
              {"warnings", json::array()}};
  t0 = now_seconds();
  try {
    for (const fs::path& p : apply_retention(o.root, {o.keep_last}).deleted) out["deleted"].push_back(p.string());
  } catch (const Error& e) {
    out["warnings"].push_back(std::string("retention: ") + e.what());
  }
  t.retention_seconds = now_seconds() - t0;
  out["retention_seconds"] = t.retention_seconds;
  return out;
}

}  // namespace

const char* save_phase_name(SavePhase phase) {
  switch (phase) {
    case SavePhase::kMidShardWrite:
      return "mid-shard-write";
    case SavePhase::kAfterShardWrite:
      return "after-shard-write";
    case SavePhase::kBeforeManifest:
      return "before-manifest";
    case SavePhase::kBeforeRename:
      return "before-rename";
    case SavePhase::kBeforePointerUpdate:
      return "before-pointer-update";
    case SavePhase::kAfterPointerUpdate:
      return "after-pointer-update";
  }
  return "unknown";
}

namespace {

// Phases 1-8 of a save into `tmp_dir`; throws on every rank when any rank fails.
SaveResult save_phases(const SaveOptions& o, int64_t step, std::span<const TensorSlice> my_slices, const json& metadata,
                       Coordinator& coord, const fs::path& tmp_dir) {
  // A save a rank reports as failed leaves nothing behind: on a full disk the partial step-N.tmp
  // would hold the very space the next attempt needs. Every rank has left the phase by then (the
  // reports were exchanged), so nobody still writes into it. A save cut short by a crash (no
  // report) is left as it is: the loader skips it as incomplete and the next save tidies it.
  auto raise_failed = [&](const std::vector<json>& reports, const std::exception_ptr& mine, const char* phase) {
    const bool failed = std::any_of(reports.begin(), reports.end(), [](const json& r) { return r.contains("error"); });
    if (failed && coord.rank() == 0) {
      std::error_code ec;
      fs::remove_all(tmp_dir, ec);
    }
    raise_if_any_failed(reports, mine, phase);
  };
  const double start = now_seconds();
  SaveResult result;
  result.step = step;
  result.path = o.root / step_dir_name(step);
  SaveTimings& t = result.timings;

  // 1. prepare
  std::exception_ptr failure;
  json report = json::object();
  if (coord.rank() == 0) {
    try {
      fs::create_directories(o.root);
      fs::remove_all(tmp_dir);  // torn by an earlier crash at this step
      fs::create_directory(tmp_dir);
      fsync_directory(o.root);
    } catch (const std::exception& e) {
      failure = std::current_exception();
      report = {{"error", e.what()}};
    }
  }
  raise_failed(all_gather_json(coord, report), failure, "prepare");
  t.prepare_seconds = now_seconds() - start;

  // 2-3. shards, then everyone learns every shard
  try {
    report = write_shard(o, tmp_dir, step, my_slices, coord, t);
    result.shard_bytes = report["bytes"].get<uint64_t>();
  } catch (const std::exception& e) {
    failure = std::current_exception();
    report = {{"error", e.what()}};
  }
  const double t_gather = now_seconds();
  const std::vector<json> shards = all_gather_json(coord, report);
  t.gather_seconds = now_seconds() - t_gather;
  raise_failed(shards, failure, "shard write");

  // 4-7. rank 0 commits; 8. everyone learns the outcome
  report = json::object();
  if (coord.rank() == 0) {
    try {
      report = commit(o, tmp_dir, result.path, step, shards, metadata, t);
    } catch (const std::exception& e) {
      failure = std::current_exception();
      report = {{"error", e.what()}};
    }
  }
  const json outcome = all_gather_json(coord, report)[0];
  raise_failed({outcome}, failure, "commit");
  result.total_bytes = outcome["total_bytes"].get<uint64_t>();
  t.manifest_seconds = outcome["manifest_seconds"].get<double>();
  t.commit_seconds = outcome["commit_seconds"].get<double>();
  t.retention_seconds = outcome["retention_seconds"].get<double>();
  for (const json& p : outcome["deleted"]) result.deleted.emplace_back(p.get<std::string>());
  for (const json& w : outcome["warnings"]) result.warnings.push_back(w.get<std::string>());
  t.total_seconds = now_seconds() - start;
  return result;
}

}  // namespace

SaveResult save_checkpoint(const SaveOptions& o, int64_t step, std::span<const TensorSlice> my_slices,
                           const json& metadata, Coordinator& coord) {
  if (o.keep_last < 1) {
    throw ConfigError("checkpoint.keep_last", std::to_string(o.keep_last), "must be >= 1");
  }
  if (step < 0) throw ConfigError("checkpoint step", std::to_string(step), "must be >= 0");
  fs::path tmp_dir = o.root / step_dir_name(step);
  tmp_dir += ".tmp";
  return save_phases(o, step, my_slices, metadata, coord, tmp_dir);
}

SaveResult save_checkpoint(const SaveOptions& options, const TrainingState& state) {
  SoloCoordinator solo;
  const std::vector<TensorSlice> slices = whole_tensors(state);
  return save_checkpoint(options, state.step, slices, state.metadata, solo);
}

}  // namespace parlab::checkpoint
