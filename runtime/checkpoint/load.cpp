#include "runtime/checkpoint/load.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <system_error>

#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/layout.h"
#include "base/text.h"

namespace parlab::checkpoint {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using parlab::printable;

// The manifest of `dir`, or the reason there is none. Whatever the file holds, an unreadable
// manifest is a problem of this checkpoint (the caller falls back to an older one), never a throw.
std::optional<Manifest> read_manifest(const fs::path& dir, std::vector<std::string>& problems) {
  const fs::path p = dir / kManifestFileName;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    problems.push_back(std::string("no ") + kManifestFileName + " (the save never committed)");
    return std::nullopt;
  }
  try {
    return Manifest::from_json(json::parse(read_small_file(p)));
  } catch (const json::exception& e) {
    problems.push_back(std::string(kManifestFileName) + " is not valid JSON: " + printable(e.what()));
  } catch (const Error& e) {
    problems.push_back(printable(e.what()));
  } catch (const std::exception& e) {
    problems.push_back(std::string(kManifestFileName) + " cannot be read: " + printable(e.what()));
  }
  return std::nullopt;
}

// A part of a ReadRequest that lies in one shard file: `out` receives elements
// [element_in_file, element_in_file + out.size()) of the piece of `name` stored in `file`.
struct Segment {
  size_t file = 0;
  std::string name;
  int64_t element_in_file = 0;
  std::span<float> out;
};

// Cut the requests along the manifest's pieces; a request the manifest cannot serve is a problem.
std::vector<Segment> segments_for(const Manifest& m, std::span<const ReadRequest> into,
                                  std::vector<std::string>& problems) {
  std::vector<Segment> out;
  for (const ReadRequest& r : into) {
    const ManifestTensor* t = m.find(r.name);
    const int64_t last = r.first_element + static_cast<int64_t>(r.out.size());
    if (t == nullptr) {
      problems.push_back("no tensor '" + r.name + "' in the manifest");
      continue;
    }
    if (r.first_element < 0 || last > t->numel()) {
      problems.push_back("'" + r.name + "' has " + std::to_string(t->numel()) + " elements; [" +
                         std::to_string(r.first_element) + ", " + std::to_string(last) + ") was asked for");
      continue;
    }
    for (const TensorPiece& p : t->pieces) {
      const int64_t lo = std::max(r.first_element, p.range.begin), hi = std::min(last, p.range.end);
      if (lo >= hi) continue;
      out.push_back({p.file, r.name, lo - p.range.begin,
                     r.out.subspan(static_cast<size_t>(lo - r.first_element), static_cast<size_t>(hi - lo))});
    }
  }
  return out;
}

// Byte ranges of `segments` (all in this file) as laid out by the file's header. Empty when the
// header is unreadable: the checksum will then say what is wrong.
std::vector<CopyOut> copies_for(const fs::path& p, const std::vector<const Segment*>& segments) {
  std::vector<CopyOut> copies;
  if (segments.empty()) return copies;
  try {
    const SafetensorsFile st = SafetensorsFile::open(p);
    for (const Segment* s : segments) {
      const TensorInfo& info = st.info(s->name);
      const uint64_t end_bytes = static_cast<uint64_t>(s->element_in_file) * sizeof(float) + s->out.size_bytes();
      if (info.dtype != Dtype::kF32 || end_bytes > info.size_bytes()) return {};
      copies.push_back(
          {st.data_start_bytes() + info.data_begin_bytes + static_cast<uint64_t>(s->element_in_file) * sizeof(float),
           std::as_writable_bytes(s->out)});
    }
  } catch (const Error&) {
    return {};
  }
  std::sort(copies.begin(), copies.end(),
            [](const CopyOut& a, const CopyOut& b) { return a.file_offset < b.file_offset; });
  return copies;
}

// Size, checksum (copying `segments` out on the way), then header-vs-manifest agreement of
// shard file `index`. Returns whether the segments were filled.
bool verify_file(const fs::path& dir, const Manifest& m, size_t index, const std::vector<const Segment*>& segments,
                 std::vector<std::string>& problems, uint64_t& bytes_hashed) {
  const ManifestFile& f = m.files[index];
  const fs::path p = dir / f.name;
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  if (ec) {
    problems.push_back(f.name + " is missing");
    return false;
  }
  if (size != f.bytes) {
    problems.push_back(f.name + " is " + std::to_string(size) + " bytes, manifest says " + std::to_string(f.bytes) +
                       " (truncated or overwritten)");
    return false;
  }
  try {
    const std::vector<CopyOut> copies = copies_for(p, segments);
    const uint64_t actual = xxh3_64_of_file(p, copies);
    bytes_hashed += size;
    if (actual != f.xxh3_64) {
      problems.push_back("checksum mismatch in " + f.name + ": expected " + kHashAlgorithm + " " +
                         hash_to_hex(f.xxh3_64) + ", actual " + hash_to_hex(actual));
      return false;
    }
    const SafetensorsFile st = SafetensorsFile::open(p);
    for (const ManifestTensor& t : m.tensors) {
      for (const TensorPiece& piece : t.pieces) {
        if (piece.file != index) continue;
        if (!st.contains(t.name) || st.info(t.name).dtype != Dtype::kF32 ||
            st.info(t.name).numel() != piece.range.count()) {
          problems.push_back(f.name + " does not hold " + std::to_string(piece.range.count()) + " F32 elements of '" +
                             t.name + "' as the manifest says");
        }
      }
    }
    return copies.size() == segments.size();
  } catch (const Error& e) {
    problems.push_back(f.name + ": " + e.what());
  }
  return false;
}

struct Verified {
  std::optional<Manifest> manifest;
  std::vector<std::string> problems;
  std::vector<Segment> pending;  // segments still to read once the checkpoint is chosen
};

Verified verify_dir(const fs::path& dir, int rank, int world_size, uint64_t& bytes_hashed,
                    std::span<const ReadRequest> into = {}) {
  Verified v;
  v.manifest = read_manifest(dir, v.problems);
  if (!v.manifest) return v;
  const std::vector<Segment> segments = segments_for(*v.manifest, into, v.problems);
  std::vector<bool> filled(v.manifest->files.size(), false);
  for (size_t i = static_cast<size_t>(rank); i < v.manifest->files.size(); i += static_cast<size_t>(world_size)) {
    std::vector<const Segment*> mine;
    for (const Segment& s : segments) {
      if (s.file == i) mine.push_back(&s);
    }
    filled[i] = verify_file(dir, *v.manifest, i, mine, v.problems, bytes_hashed);
  }
  for (const Segment& s : segments) {
    if (!filled[s.file]) v.pending.push_back(s);
  }
  return v;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

// Rank 0's view of the root, so every rank walks the same candidate list. A listing failure on
// rank 0 is raised on every rank (nobody may be left waiting in the next collective).
std::vector<CheckpointEntry> agreed_listing(const fs::path& root, Coordinator& coord) {
  json mine = json::object();
  if (coord.rank() == 0) {
    try {
      json entries = json::array();
      for (const CheckpointEntry& e : list_checkpoints(root)) {
        entries.push_back({{"step", e.step}, {"state", static_cast<int>(e.state)}, {"path", e.path.string()}});
      }
      mine["entries"] = std::move(entries);
    } catch (const std::exception& e) {
      mine["error"] = std::string("cannot list checkpoints in ") + root.string() + ": " + e.what();
    }
  }
  const json agreed = json::parse(coord.all_gather(mine.dump())[0]);
  if (agreed.contains("error")) throw CheckpointIoError(agreed["error"].get<std::string>());
  std::vector<CheckpointEntry> out;
  for (const json& e : agreed["entries"]) {
    out.push_back({e["step"].get<int64_t>(), static_cast<EntryState>(e["state"].get<int>()),
                   fs::path(e["path"].get<std::string>())});
  }
  return out;
}

void note_pointer_lag(const fs::path& root, const CheckpointEntry& chosen, LoadResult& result) {
  const auto latest = read_pointer(root, kLatestPointer);
  const std::string name = chosen.path.filename().string();
  if (!latest) {
    result.notes.push_back("no valid '" + std::string(kLatestPointer) +
                           "' pointer; used the newest verified checkpoint " + name);
  } else if (*latest != name) {
    result.notes.push_back("'" + std::string(kLatestPointer) + "' names " + *latest + " but " + name +
                           " was used: it is the newest complete checkpoint that verified");
  }
}

}  // namespace

Checkpoint::Checkpoint(fs::path dir, Manifest manifest)
    : dir_(std::move(dir)), manifest_(std::move(manifest)), files_(manifest_.files.size()) {}

const SafetensorsFile& Checkpoint::file(size_t index) const {
  if (!files_[index]) files_[index] = SafetensorsFile::open(dir_ / manifest_.files[index].name);
  return *files_[index];
}

void Checkpoint::read(const std::string& name, int64_t first_element, std::span<float> out) const {
  const ManifestTensor* t = manifest_.find(name);
  if (t == nullptr) throw RuntimeError(dir_.string() + ": checkpoint has no tensor '" + name + "'");
  const int64_t last = first_element + static_cast<int64_t>(out.size());
  if (first_element < 0 || last > t->numel()) {
    throw RuntimeError(dir_.string() + ": elements [" + std::to_string(first_element) + ", " + std::to_string(last) +
                       ") are outside '" + name + "' (" + std::to_string(t->numel()) + " elements)");
  }
  const double t0 = now_seconds();
  for (const TensorPiece& p : t->pieces) {
    const int64_t lo = std::max(first_element, p.range.begin), hi = std::min(last, p.range.end);
    if (lo >= hi) continue;
    file(p.file).read_f32_range(name, lo - p.range.begin,
                                out.subspan(static_cast<size_t>(lo - first_element), static_cast<size_t>(hi - lo)));
  }
  bytes_read_ += out.size_bytes();
  read_seconds_ += now_seconds() - t0;
}

void Checkpoint::read_piece(size_t file_index, const std::string& name, int64_t element_in_file,
                            std::span<float> out) const {
  const double t0 = now_seconds();
  file(file_index).read_f32_range(name, element_in_file, out);
  bytes_read_ += out.size_bytes();
  read_seconds_ += now_seconds() - t0;
}

std::vector<float> Checkpoint::read_tensor(const std::string& name) const {
  const ManifestTensor* t = manifest_.find(name);
  if (t == nullptr) throw RuntimeError(dir_.string() + ": checkpoint has no tensor '" + name + "'");
  std::vector<float> v(static_cast<size_t>(t->numel()));
  read(name, 0, v);
  return v;
}

TrainingState Checkpoint::read_all() const {
  TrainingState s;
  s.step = manifest_.step;
  s.metadata = manifest_.metadata;
  for (const ManifestTensor& t : manifest_.tensors) s.tensors.push_back({t.name, t.shape, read_tensor(t.name)});
  return s;
}

std::string LoadResult::summary() const {
  std::string s =
      checkpoint ? "resumed from step " + std::to_string(checkpoint->step()) + " (" + checkpoint->path().string() + ")"
                 : std::string("no usable checkpoint; starting from scratch");
  for (const SkippedCheckpoint& k : skipped) s += "; skipped step " + std::to_string(k.step) + ": " + k.reason;
  return s;
}

std::vector<std::string> verify_checkpoint(const fs::path& dir, int rank, int world_size, uint64_t* bytes_hashed) {
  uint64_t bytes = 0;
  Verified v = verify_dir(dir, rank, world_size, bytes);
  if (bytes_hashed) *bytes_hashed = bytes;
  return std::move(v.problems);
}

LoadResult load_checkpoint(const LoadOptions& o, Coordinator& coord, std::span<const ReadRequest> into) {
  const double start = now_seconds();
  LoadResult result;
  const std::vector<CheckpointEntry> entries = agreed_listing(o.root, coord);
  result.timings.list_seconds = now_seconds() - start;

  const double t_verify = now_seconds();
  for (const CheckpointEntry& e : entries) {
    if (o.max_step && e.step > *o.max_step) continue;
    if (e.state == EntryState::kDeleting) continue;
    if (e.state == EntryState::kIncomplete) {
      result.skipped.push_back({e.step, e.path,
                                "incomplete: the save stopped before its commit (" + e.path.filename().string() +
                                    " has no committed manifest)"});
      continue;
    }
    Verified v = verify_dir(e.path, coord.rank(), coord.world_size(), result.timings.bytes_verified, into);
    if (v.manifest && v.manifest->step != e.step) {
      v.problems.push_back("manifest says step " + std::to_string(v.manifest->step) + " but the directory is " +
                           e.path.filename().string());
    }
    // Every rank must reach the same verdict, so the verdict is the union of all findings.
    std::vector<std::string> problems;
    std::set<std::string> seen;
    for (const std::string& s : coord.all_gather(json(v.problems).dump())) {
      for (const std::string& p : json::parse(s).get<std::vector<std::string>>()) {
        if (seen.insert(p).second) problems.push_back(p);
      }
    }
    if (!problems.empty()) {
      result.skipped.push_back({e.step, e.path, join(problems, "; ")});
      continue;
    }
    result.checkpoint.emplace(e.path, std::move(*v.manifest));
    const double t_read = now_seconds();
    for (const Segment& s : v.pending) result.checkpoint->read_piece(s.file, s.name, s.element_in_file, s.out);
    result.timings.read_seconds = now_seconds() - t_read;
    if (coord.rank() == 0) note_pointer_lag(o.root, e, result);
    if (coord.rank() == 0 && o.record_last_known_good &&
        read_pointer(o.root, kLastKnownGoodPointer) != e.path.filename().string()) {
      try {
        write_pointer(o.root, kLastKnownGoodPointer, e.path.filename().string());
      } catch (const Error& err) {
        result.notes.push_back(std::string("could not record last-known-good: ") + err.what());
      }
    }
    break;
  }
  result.timings.verify_seconds = now_seconds() - t_verify - result.timings.read_seconds;
  result.timings.total_seconds = now_seconds() - start;
  return result;
}

LoadResult load_checkpoint(const LoadOptions& options) {
  SoloCoordinator solo;
  return load_checkpoint(options, solo);
}

}  // namespace parlab::checkpoint
