// The safetensors reader/writer against the format's definition: a file we write is taken apart
// by a parser written here from the spec, and a file built here byte by byte is read back.
#include "runtime/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tests/runtime/checkpoint/test_util.h"

namespace parlab::checkpoint {
namespace {

using nlohmann::json;
using testing::ScratchDir;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian u64 from raw bytes, assembled by hand (independent of the reader under test).
uint64_t le64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

std::string le64_bytes(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

TEST(Safetensors, IndependentParserReadsWhatWeWrite) {
  ScratchDir dir;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 7.0f};  // shape [2, 3]
  const std::vector<int64_t> b = {-1, 1LL << 40};                        // shape [2]
  const std::vector<TensorView> views = {TensorView::f32("a", {2, 3}, a), TensorView::i64("b", {2}, b)};
  const auto w = write_safetensors(dir.path() / "x.safetensors", views, {{"purpose", "test"}});

  const std::string file = slurp(dir.path() / "x.safetensors");
  const uint64_t n = le64(file, 0);
  // Data section by hand: a is 6 * 4 = 24 bytes at [0, 24); b is 2 * 8 = 16 bytes at [24, 40).
  ASSERT_EQ(file.size(), 8 + n + 40);
  EXPECT_EQ(w.file_bytes, file.size());
  const json h = json::parse(file.substr(8, n));
  EXPECT_EQ(h["a"]["dtype"], "F32");
  EXPECT_EQ(h["a"]["shape"], json({2, 3}));
  EXPECT_EQ(h["a"]["data_offsets"], json({0, 24}));
  EXPECT_EQ(h["b"]["dtype"], "I64");
  EXPECT_EQ(h["b"]["shape"], json({2}));
  EXPECT_EQ(h["b"]["data_offsets"], json({24, 40}));
  EXPECT_EQ(h["__metadata__"], json({{"purpose", "test"}}));

  const std::string data = file.substr(8 + n);
  float a_back[6];
  std::memcpy(a_back, data.data(), 24);
  EXPECT_TRUE(testing::bits_equal(a, std::vector<float>(a_back, a_back + 6)));
  EXPECT_EQ(le64(data, 24), static_cast<uint64_t>(-1));
  EXPECT_EQ(le64(data, 32), 1ULL << 40);
  // The checksum the writer reports is XXH3_64bits of the whole file.
  EXPECT_EQ(w.xxh3_64, XXH3_64bits(file.data(), file.size()));
}

TEST(Safetensors, HeaderIsSpacePaddedToEightByteAlignment) {
  ScratchDir dir;
  const std::vector<float> v = {1.0f};
  // Names of 1..12 characters move the JSON length through every residue mod 8.
  for (int len = 1; len <= 12; ++len) {
    const std::string name(static_cast<size_t>(len), 'w');
    const std::vector<TensorView> views = {TensorView::f32(name, {1}, v)};
    write_safetensors(dir.path() / "p.safetensors", views);
    const std::string file = slurp(dir.path() / "p.safetensors");
    const uint64_t n = le64(file, 0);
    EXPECT_EQ(n % 8, 0u) << name;
    EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-byte aligned";
    const std::string header = file.substr(8, n);
    const size_t close = header.find_last_of('}');
    EXPECT_LT(n - 1 - close, 8u) << "at most 7 bytes of padding";
    for (size_t i = close + 1; i < n; ++i) EXPECT_EQ(header[i], ' ') << "padding must be spaces";
  }
}

TEST(Safetensors, ReadsAFileBuiltByHand) {
  ScratchDir dir;
  // What the reference Python writer produces for {"w": tensor([[1, 2], [3, 4]]) (float32),
  // "ids": tensor([7]) (int64)} with metadata {"format": "pt"}: ids sorts first by alignment.
  std::string header = R"({"__metadata__":{"format":"pt"},"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                       R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data = le64_bytes(7);
  const float w[4] = {1, 2, 3, 4};
  data.append(reinterpret_cast<const char*>(w), 16);
  spit(dir.path() / "h.safetensors", le64_bytes(header.size()) + header + data);

  const SafetensorsFile f = SafetensorsFile::open(dir.path() / "h.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.data_start_bytes(), 8 + header.size());
  EXPECT_EQ(f.read_i64("ids"), std::vector<int64_t>({7}));
  EXPECT_EQ(f.read_f32("w"), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(f.info("w").shape, std::vector<int64_t>({2, 2}));
  std::vector<float> mid(2);
  f.read_f32_range("w", 1, mid);
  EXPECT_EQ(mid, std::vector<float>({2, 3}));
  EXPECT_THROW(f.read_f32("ids"), SafetensorsError) << "dtype is checked";
  EXPECT_THROW(f.info("nope"), SafetensorsError);
}

TEST(Safetensors, RoundTripKeepsShapesScalarsAndEmptyTensors) {
  ScratchDir dir;
  const std::vector<float> scalar = {42.0f}, empty = {};
  const std::vector<int64_t> ids = {3, 1, 4, 1, 5, 9};
  const std::vector<TensorView> views = {TensorView::f32("scalar", {}, scalar), TensorView::f32("empty", {0, 3}, empty),
                                         TensorView::i64("ids", {2, 3}, ids)};
  write_safetensors(dir.path() / "r.safetensors", views, {{"k", "v"}});
  const SafetensorsFile f = SafetensorsFile::open(dir.path() / "r.safetensors");
  EXPECT_EQ(f.read_f32("scalar"), scalar);
  EXPECT_EQ(f.info("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(f.read_f32("empty").size(), 0u);
  EXPECT_EQ(f.info("empty").shape, std::vector<int64_t>({0, 3}));
  EXPECT_EQ(f.read_i64("ids"), ids);
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_EQ(f.tensors().size(), 3u);
}

TEST(Safetensors, WriterRejectsInconsistentInput) {
  ScratchDir dir;
  const std::vector<float> v = {1, 2, 3};
  const std::vector<TensorView> wrong_size = {TensorView::f32("x", {2, 2}, v)};
  EXPECT_THROW(write_safetensors(dir.path() / "a.safetensors", wrong_size), SafetensorsError);
  const std::vector<TensorView> twice = {TensorView::f32("x", {3}, v), TensorView::f32("x", {3}, v)};
  EXPECT_THROW(write_safetensors(dir.path() / "b.safetensors", twice), SafetensorsError);
  const std::vector<TensorView> reserved = {TensorView::f32("__metadata__", {3}, v)};
  EXPECT_THROW(write_safetensors(dir.path() / "c.safetensors", reserved), SafetensorsError);
}

// Each malformed file must be refused when opened, not misread later.
TEST(Safetensors, ReaderRejectsMalformedFiles) {
  ScratchDir dir;
  auto file_with = [&](const std::string& header_json, size_t data_bytes) {
    std::string h = header_json;
    h.append((8 - h.size() % 8) % 8, ' ');
    spit(dir.path() / "m.safetensors", le64_bytes(h.size()) + h + std::string(data_bytes, '\0'));
    return dir.path() / "m.safetensors";
  };
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_NO_THROW(SafetensorsFile::open(file_with("{" + ok_entry + "}", 8)));

  EXPECT_THROW(SafetensorsFile::open(file_with("{" + ok_entry + "}", 12)), SafetensorsError)
      << "trailing bytes not covered by any tensor";
  EXPECT_THROW(SafetensorsFile::open(file_with("{" + ok_entry + "}", 4)), SafetensorsError)
      << "data section shorter than the offsets";
  EXPECT_THROW(SafetensorsFile::open(file_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
               SafetensorsError)
      << "offsets do not hold the shape";
  EXPECT_THROW(SafetensorsFile::open(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
               SafetensorsError)
      << "hole before the first tensor";
  EXPECT_THROW(SafetensorsFile::open(file_with(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8)),
               SafetensorsError)
      << "unknown dtype";
  EXPECT_THROW(SafetensorsFile::open(file_with("[1, 2]", 0)), SafetensorsError) << "not an object";
  EXPECT_THROW(SafetensorsFile::open(file_with("{\"a\": ", 0)), SafetensorsError) << "not JSON";

  spit(dir.path() / "short.safetensors", le64_bytes(1000) + "{}");
  EXPECT_THROW(SafetensorsFile::open(dir.path() / "short.safetensors"), SafetensorsError)
      << "header length past the end of the file";
  spit(dir.path() / "tiny.safetensors", "abc");
  EXPECT_THROW(SafetensorsFile::open(dir.path() / "tiny.safetensors"), SafetensorsError);
}

TEST(Safetensors, ProgressIsReportedPerChunk) {
  ScratchDir dir;
  std::vector<float> v(1000, 1.0f);  // 4000 data bytes
  const std::vector<TensorView> views = {TensorView::f32("v", {1000}, v)};
  SafetensorsWriteOptions o;
  o.max_chunk_bytes = 1024;
  std::vector<uint64_t> seen;
  uint64_t total = 0;
  o.on_progress = [&](uint64_t written, uint64_t file_bytes) {
    seen.push_back(written);
    total = file_bytes;
  };
  const auto w = write_safetensors(dir.path() / "c.safetensors", views, {}, o);
  // ceil(4000 / 1024) = 4 chunks; the last report is the whole file.
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back(), w.file_bytes);
  EXPECT_EQ(total, w.file_bytes);
  EXPECT_EQ(seen[1] - seen[0], 1024u);
}

}  // namespace
}  // namespace parlab::checkpoint
