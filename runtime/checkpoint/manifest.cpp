#include "runtime/checkpoint/manifest.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/safetensors.h"

namespace parlab::checkpoint {

using nlohmann::json;

int64_t ManifestTensor::numel() const { return shape_numel(shape); }

const ManifestTensor* Manifest::find(const std::string& name) const {
  for (const ManifestTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint64_t Manifest::total_file_bytes() const {
  uint64_t n = 0;
  for (const ManifestFile& f : files) n += f.bytes;
  return n;
}

json Manifest::to_json() const {
  json files_j = json::array();
  for (const ManifestFile& f : files) {
    files_j.push_back({{"name", f.name}, {"bytes", f.bytes}, {"xxh3_64", hash_to_hex(f.xxh3_64)}});
  }
  json tensors_j = json::array();
  for (const ManifestTensor& t : tensors) {
    json pieces = json::array();
    for (const TensorPiece& p : t.pieces) {
      pieces.push_back({{"file", p.file}, {"begin", p.range.begin}, {"end", p.range.end}});
    }
    tensors_j.push_back({{"name", t.name}, {"shape", t.shape}, {"pieces", std::move(pieces)}});
  }
  return {{"format", "parlab-checkpoint"},
          {"format_version", format_version},
          {"parlab_version", parlab_version},
          {"step", step},
          {"world_size", world_size},
          {"hash", kHashAlgorithm},
          {"files", std::move(files_j)},
          {"tensors", std::move(tensors_j)},
          {"metadata", metadata}};
}

Manifest Manifest::from_json(const json& j) {
  Manifest m;
  try {
    if (j.at("format").get<std::string>() != "parlab-checkpoint") {
      throw ManifestError("manifest: format is not 'parlab-checkpoint'");
    }
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version != kManifestFormatVersion) {
      throw ManifestError("manifest: format_version " + std::to_string(m.format_version) +
                          " is not supported (this build reads " + std::to_string(kManifestFormatVersion) + ")");
    }
    if (j.at("hash").get<std::string>() != kHashAlgorithm) {
      throw ManifestError("manifest: hash '" + j.at("hash").get<std::string>() +
                          "' is not supported (this build uses " + kHashAlgorithm + ")");
    }
    m.parlab_version = j.at("parlab_version").get<std::string>();
    m.step = j.at("step").get<int64_t>();
    m.world_size = j.at("world_size").get<int>();
    for (const json& f : j.at("files")) {
      m.files.push_back({f.at("name").get<std::string>(), f.at("bytes").get<uint64_t>(),
                         hash_from_hex(f.at("xxh3_64").get<std::string>())});
    }
    for (const json& t : j.at("tensors")) {
      ManifestTensor mt{t.at("name").get<std::string>(), t.at("shape").get<std::vector<int64_t>>(), {}};
      for (const json& p : t.at("pieces")) {
        mt.pieces.push_back({p.at("file").get<size_t>(), {p.at("begin").get<int64_t>(), p.at("end").get<int64_t>()}});
      }
      m.tensors.push_back(std::move(mt));
    }
    m.metadata = j.at("metadata");
  } catch (const json::exception& e) {
    throw ManifestError(std::string("manifest: ") + e.what());
  } catch (const RuntimeError& e) {
    if (dynamic_cast<const ManifestError*>(&e)) throw;
    throw ManifestError(std::string("manifest: ") + e.what());
  }
  m.validate();
  return m;
}

void Manifest::validate() const {
  if (world_size < 1 || files.size() != static_cast<size_t>(world_size)) {
    throw ManifestError("manifest: world_size " + std::to_string(world_size) + " but " + std::to_string(files.size()) +
                        " files listed");
  }
  std::set<std::string> names;
  for (const ManifestFile& f : files) {
    // Names are joined to the checkpoint directory; anything but a plain file name could escape it.
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." || f.name == "..") {
      throw ManifestError("manifest: file name '" + f.name + "' is not a plain file name");
    }
    if (!names.insert(f.name).second) throw ManifestError("manifest: file '" + f.name + "' repeated");
  }
  names.clear();
  for (const ManifestTensor& t : tensors) {
    if (!names.insert(t.name).second) throw ManifestError("manifest: tensor '" + t.name + "' repeated");
    for (int64_t d : t.shape) {
      if (d < 0) throw ManifestError("manifest: tensor '" + t.name + "' has a negative dimension");
    }
    int64_t expect = 0;
    for (const TensorPiece& p : t.pieces) {
      if (p.file >= files.size()) {
        throw ManifestError("manifest: tensor '" + t.name + "' names file " + std::to_string(p.file) + " of " +
                            std::to_string(files.size()));
      }
      if (p.range.begin != expect || p.range.end < p.range.begin) {
        throw ManifestError("manifest: tensor '" + t.name + "' piece [" + std::to_string(p.range.begin) + ", " +
                            std::to_string(p.range.end) + ") should begin at element " + std::to_string(expect));
      }
      expect = p.range.end;
    }
    if (expect != t.numel()) {
      throw ManifestError("manifest: tensor '" + t.name + "' pieces cover " + std::to_string(expect) + " of " +
                          std::to_string(t.numel()) + " elements");
    }
  }
}

std::string shard_file_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank-%05d.safetensors", rank);
  return buf;
}

}  // namespace parlab::checkpoint
