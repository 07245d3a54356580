#include "runtime/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace parlab::checkpoint {

// The format is little-endian; so are the machines we run on. Byte-swapping would go here.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using nlohmann::json;

struct DtypeRow {
  Dtype dtype;
  const char* name;
  size_t size_bytes;
};

constexpr DtypeRow kDtypes[] = {
    {Dtype::kBool, "BOOL", 1}, {Dtype::kU8, "U8", 1},   {Dtype::kI8, "I8", 1},     {Dtype::kI16, "I16", 2},
    {Dtype::kU16, "U16", 2},   {Dtype::kF16, "F16", 2}, {Dtype::kBF16, "BF16", 2}, {Dtype::kI32, "I32", 4},
    {Dtype::kU32, "U32", 4},   {Dtype::kF32, "F32", 4}, {Dtype::kI64, "I64", 8},   {Dtype::kU64, "U64", 8},
    {Dtype::kF64, "F64", 8},
};

const DtypeRow& row(Dtype dtype) {
  for (const DtypeRow& r : kDtypes) {
    if (r.dtype == dtype) return r;
  }
  throw SafetensorsError("unknown dtype enum value");
}

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& why) {
  throw SafetensorsError(path.string() + ": not a valid safetensors file: " + why);
}

void check_tensor_view(const TensorView& t) {
  if (t.name.empty() || t.name == "__metadata__") {
    throw SafetensorsError("tensor name '" + t.name + "' is reserved or empty");
  }
  for (int64_t d : t.shape) {
    if (d < 0) throw SafetensorsError(t.name + ": negative dimension in " + shape_to_string(t.shape));
  }
  const uint64_t want = static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size_bytes(t.dtype);
  if (t.bytes.size() != want) {
    throw SafetensorsError(t.name + ": shape " + shape_to_string(t.shape) + " of " + dtype_name(t.dtype) + " needs " +
                           std::to_string(want) + " bytes, got " + std::to_string(t.bytes.size()));
  }
}

}  // namespace

const char* dtype_name(Dtype dtype) { return row(dtype).name; }

size_t dtype_size_bytes(Dtype dtype) { return row(dtype).size_bytes; }

Dtype dtype_from_name(const std::string& name) {
  for (const DtypeRow& r : kDtypes) {
    if (name == r.name) return r.dtype;
  }
  throw SafetensorsError("unknown safetensors dtype '" + name + "'");
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

TensorView TensorView::f32(std::string name, std::vector<int64_t> shape, std::span<const float> v) {
  return TensorView{std::move(name), Dtype::kF32, std::move(shape), std::as_bytes(v)};
}

TensorView TensorView::i64(std::string name, std::vector<int64_t> shape, std::span<const int64_t> v) {
  return TensorView{std::move(name), Dtype::kI64, std::move(shape), std::as_bytes(v)};
}

std::string encode_safetensors_header(std::span<const TensorView> tensors,
                                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    check_tensor_view(t);
    if (header.contains(t.name)) throw SafetensorsError("tensor name '" + t.name + "' repeated");
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Pad so the data section starts on an 8-byte boundary: 8 + N ≡ 0 (mod 8) ⇔ N ≡ 0 (mod 8).
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

SafetensorsWriteResult write_safetensors(const std::filesystem::path& path, std::span<const TensorView> tensors,
                                         const std::map<std::string, std::string>& metadata,
                                         const SafetensorsWriteOptions& options) {
  const std::string header = encode_safetensors_header(tensors, metadata);
  uint64_t data_bytes = 0;
  for (const TensorView& t : tensors) data_bytes += t.bytes.size();
  const uint64_t file_bytes = 8 + header.size() + data_bytes;
  const size_t chunk = std::max<size_t>(options.max_chunk_bytes, 1);

  File f = File::create(path);
  Xxh3Stream hash;
  auto put = [&](std::span<const std::byte> bytes) {
    hash.update(bytes);  // hash while the bytes are hot in cache, then write them
    f.write_all(bytes);
  };
  const uint64_t n = header.size();  // little-endian by the static_assert above
  put(std::as_bytes(std::span(&n, 1)));
  put(std::as_bytes(std::span(header.data(), header.size())));
  uint64_t written = 8 + header.size();
  for (const TensorView& t : tensors) {
    for (size_t at = 0; at < t.bytes.size(); at += chunk) {
      const auto piece = t.bytes.subspan(at, std::min(chunk, t.bytes.size() - at));
      put(piece);
      written += piece.size();
      if (options.on_progress) options.on_progress(written, file_bytes);
    }
  }
  if (options.fsync) f.fsync();
  return {file_bytes, hash.digest()};
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile s(File::open_read(path));
  s.parse_header();
  return s;
}

void SafetensorsFile::parse_header() {
  const std::filesystem::path& p = file_.path();
  file_bytes_ = file_.size_bytes();
  if (file_bytes_ < 8) bad_file(p, "shorter than the 8-byte header length");
  uint64_t n = 0;
  file_.pread_all(std::as_writable_bytes(std::span(&n, 1)), 0);
  if (n > kMaxHeaderBytes) bad_file(p, "header length " + std::to_string(n) + " is too large");
  if (8 + n > file_bytes_) {
    bad_file(p, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(file_bytes_) +
                    "-byte file");
  }
  header_bytes_ = n;
  std::string text(n, '\0');
  file_.pread_all(std::as_writable_bytes(std::span(text.data(), text.size())), 8);
  if (text.empty() || text.front() != '{') bad_file(p, "header does not start with '{'");

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    bad_file(p, std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) bad_file(p, "header is not a JSON object");

  try {
    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        for (auto& [mk, mv] : value.items()) metadata_[mk] = mv.get<std::string>();
        continue;
      }
      TensorInfo t;
      t.name = key;
      t.dtype = dtype_from_name(value.at("dtype").get<std::string>());
      t.shape = value.at("shape").get<std::vector<int64_t>>();
      const auto offsets = value.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2) bad_file(p, key + ": data_offsets needs [begin, end]");
      t.data_begin_bytes = offsets[0];
      t.data_end_bytes = offsets[1];
      for (int64_t d : t.shape) {
        if (d < 0) bad_file(p, key + ": negative dimension in " + shape_to_string(t.shape));
      }
      if (t.data_end_bytes < t.data_begin_bytes ||
          t.size_bytes() != static_cast<uint64_t>(t.numel()) * dtype_size_bytes(t.dtype)) {
        bad_file(p, key + ": data_offsets [" + std::to_string(t.data_begin_bytes) + ", " +
                        std::to_string(t.data_end_bytes) + "] do not hold shape " + shape_to_string(t.shape) + " of " +
                        dtype_name(t.dtype));
      }
      tensors_.push_back(std::move(t));
    }
  } catch (const json::exception& e) {
    bad_file(p, std::string("malformed header entry: ") + e.what());
  }

  // Tensors must tile the data section exactly, in offset order.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.data_begin_bytes != b.data_begin_bytes ? a.data_begin_bytes < b.data_begin_bytes
                                                    : a.data_end_bytes < b.data_end_bytes;
  });
  uint64_t expect = 0;
  for (const TensorInfo& t : tensors_) {
    if (t.data_begin_bytes != expect) {
      bad_file(p, t.name + " begins at data byte " + std::to_string(t.data_begin_bytes) + ", expected " +
                      std::to_string(expect) + " (hole or overlap)");
    }
    expect = t.data_end_bytes;
  }
  const uint64_t data_bytes = file_bytes_ - 8 - header_bytes_;
  if (expect != data_bytes) {
    bad_file(
        p, "tensors cover " + std::to_string(expect) + " data bytes but the file holds " + std::to_string(data_bytes));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw SafetensorsError(path().string() + ": no tensor named '" + name + "'");
  return tensors_[it->second];
}

const TensorInfo& SafetensorsFile::typed(const std::string& name, Dtype want) const {
  const TensorInfo& t = info(name);
  if (t.dtype != want) {
    throw SafetensorsError(path().string() + ": tensor '" + name + "' is " + dtype_name(t.dtype) + ", not " +
                           dtype_name(want));
  }
  return t;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const TensorInfo& t = typed(name, Dtype::kF32);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  file_.pread_all(std::as_writable_bytes(std::span(out)), data_start_bytes() + t.data_begin_bytes);
  return out;
}

std::vector<int64_t> SafetensorsFile::read_i64(const std::string& name) const {
  const TensorInfo& t = typed(name, Dtype::kI64);
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  file_.pread_all(std::as_writable_bytes(std::span(out)), data_start_bytes() + t.data_begin_bytes);
  return out;
}

void SafetensorsFile::read_f32_range(const std::string& name, int64_t first_element, std::span<float> out) const {
  const TensorInfo& t = typed(name, Dtype::kF32);
  if (first_element < 0 || first_element + static_cast<int64_t>(out.size()) > t.numel()) {
    throw SafetensorsError(path().string() + ": elements [" + std::to_string(first_element) + ", " +
                           std::to_string(first_element + static_cast<int64_t>(out.size())) + ") are outside tensor '" +
                           name + "' of " + std::to_string(t.numel()) + " elements");
  }
  const uint64_t at = data_start_bytes() + t.data_begin_bytes + static_cast<uint64_t>(first_element) * sizeof(float);
  file_.pread_all(std::as_writable_bytes(out), at);
}

std::vector<std::byte> SafetensorsFile::read_bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<std::byte> out(t.size_bytes());
  file_.pread_all(out, data_start_bytes() + t.data_begin_bytes);
  return out;
}

}  // namespace parlab::checkpoint
