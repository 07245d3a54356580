#include "strategy/io.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "base/errors.h"
#include "strategy/host_cpu.h"
#include "strategy/presets.h"
#include "strategy/toml_reader.h"
#include "base/units.h"

namespace parlab::strategy {
namespace fs = std::filesystem;
namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("file", path.string(), "cannot be read");
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

// Upper bounds of file values: far beyond any real model or machine, low enough that the ledger's
// and the cost model's products of them stay finite.
constexpr int64_t kMaxLayers = 1 << 20;
constexpr int64_t kMaxWidth = 1 << 24;
constexpr int64_t kMaxCount = 1 << 20;
constexpr double kMaxParams = 1e15;
constexpr double kMaxRate = 1e9;  // GB, GB/s, TFLOP/s

bool looks_like_path(std::string_view s) { return s.find('/') != std::string_view::npos || s.ends_with(".toml"); }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

template <typename T, typename Parse>
T load_named(std::string_view name, const char* kind, const char* subdir, const std::vector<std::string>& names,
             Parse parse) {
  if (name.empty()) throw ConfigError(kind, "(empty)", "give a preset name or a TOML file");
  if (looks_like_path(name)) {
    const fs::path p{std::string(name)};
    if (!fs::exists(p)) throw ConfigError(kind, std::string(name), "no such file");
    if (fs::is_directory(p))
      throw ConfigError(kind, std::string(name), "is a directory; give a preset name or a TOML file");
    return parse(read_file(p), p.string());
  }
  const fs::path user = fs::path(results_dir()) / subdir / (std::string(name) + ".toml");
  if (fs::exists(user)) return parse(read_file(user), user.string());
  if (auto text = embedded_preset(subdir, name))
    return parse(*text, std::string(subdir) + "/" + std::string(name) + ".toml");
  throw ConfigError(kind, std::string(name),
                    "unknown preset; available: " + join(names) + " (or a path to a .toml file)");
}

}  // namespace

std::string results_dir() {
  const char* env = std::getenv("PARLAB_RESULTS");
  return env && *env ? env : "results";
}

ModelSpec parse_model_toml(std::string_view text, const std::string& source) {
  const toml::table root = parse_toml(text, source);
  TableReader r(root, source, "");
  ModelSpec m;
  m.name = r.string("name").value_or(fs::path(source).stem().string());
  r.string("description");
  const std::string kind = r.string("kind").value_or("transformer");
  if (kind == "transformer")
    m.kind = ModelKind::kTransformer;
  else if (kind == "mlp")
    m.kind = ModelKind::kMlp;
  else if (kind == "params")
    m.kind = ModelKind::kParams;
  else
    r.fail("kind", kind, "must be transformer, mlp or params");
  // Bounds far above any real model, low enough that products of sizes stay finite in int64/double.
  m.layers = r.integer("layers", 1, kMaxLayers).value_or(0);
  m.hidden = r.integer("hidden", 1, kMaxWidth).value_or(0);
  m.heads = r.integer("heads", 1, kMaxWidth).value_or(0);
  m.kv_heads = r.integer("kv_heads", 0, kMaxWidth).value_or(0);
  m.ffn = r.integer("ffn", 1, kMaxWidth).value_or(m.kind == ModelKind::kTransformer ? 4 * m.hidden : 0);
  m.seq_len = r.integer("seq_len", 1, kMaxWidth).value_or(0);
  m.vocab = r.integer("vocab", 1, kMaxWidth).value_or(0);
  m.gated_mlp = r.boolean("gated_mlp").value_or(false);
  m.biases = r.boolean("biases").value_or(true);
  m.learned_positions = r.boolean("learned_positions").value_or(true);
  m.tied_embeddings = r.boolean("tied_embeddings").value_or(true);
  m.classes = r.integer("classes", 1, kMaxWidth).value_or(0);
  m.param_count = r.number("params", 0, kMaxParams, true).value_or(0);
  m.default_microbatch = r.integer("microbatch", 1, kMaxWidth).value_or(1);
  m.default_lr = r.number("lr", 0, 1e3, true).value_or(0);
  if (auto prec = r.string("precision")) {
    if (*prec == "fp32")
      m.default_precision = Precision::kFp32;
    else if (*prec == "mixed")
      m.default_precision = Precision::kMixed;
    else
      r.fail("precision", *prec, "must be fp32 or mixed");
  } else if (m.kind == ModelKind::kMlp && !host_multiplies_bf16()) {
    // An MLP trains on this machine's CPU, whose mixed precision needs bf16 products: one that
    // names no precision trains in fp32 where they are missing, rather than being refused.
    m.default_precision = Precision::kFp32;
  }
  r.reject_unknown(
      "name, description, kind, layers, hidden, heads, kv_heads, ffn, seq_len, vocab, "
      "gated_mlp, biases, learned_positions, tied_embeddings, classes, params, microbatch, precision, lr");
  validate(m, source);
  return m;
}

namespace {

// A device figure the cost model divides by: given, finite and > 0, named as the file names it.
double required_positive(TableReader& r, std::string_view key) {
  const auto v = r.number(key, 0, kMaxRate, true);
  if (!v) r.fail(key, "(missing)", "required: a number > 0");
  return *v;
}

double memory_bytes(TableReader& r) {
  const auto gib = r.number("memory_gib", 0, kMaxRate, true);
  const auto gb = r.number("memory_gb", 0, kMaxRate, true);
  if (gib && gb) r.fail("memory_gb", std::to_string(*gb), "give memory_gb or memory_gib, not both");
  if (gib) return *gib * units::kGiB;
  if (gb) return *gb * units::kGB;
  r.fail("memory_gb", "(missing)", "device memory is required (memory_gb or memory_gib)");
}

LinkSpec read_link(const toml::table* t, const std::string& source, const std::string& name) {
  if (!t) throw ConfigError(source + ": " + name, "(missing)", "a [" + name + "] table is required");
  TableReader r(*t, source, name + ".");
  LinkSpec l;
  l.kind = r.string("kind").value_or(name);
  const auto gbyte = r.number("bandwidth_gb_per_s", 0, kMaxRate, true, /*inf_ok=*/true);
  const auto gbit = r.number("bandwidth_gbit_per_s", 0, kMaxRate, true, /*inf_ok=*/true);
  if (gbyte && gbit)
    r.fail("bandwidth_gb_per_s", std::to_string(*gbyte), "give bandwidth_gb_per_s or bandwidth_gbit_per_s, not both");
  if (!gbyte && !gbit) r.fail("bandwidth_gb_per_s", "(missing)", "link bandwidth is required");
  l.bytes_per_s = gbyte ? *gbyte * units::kGB : *gbit * units::kGbit_per_s;
  l.latency_seconds = r.number("latency_us", 0, 1e9, false).value_or(0) * 1e-6;
  l.protocol_efficiency = r.number("protocol_efficiency", 0, 1, true).value_or(1.0);
  if (const auto sizes = r.numbers("measured_sizes_mib", 0, 1e9, true)) {
    if (sizes->size() < 2) r.fail("measured_sizes_mib", std::to_string(sizes->size()) + " values", "at least 2 sizes");
    for (size_t i = 1; i < sizes->size(); ++i)
      if ((*sizes)[i] <= (*sizes)[i - 1])
        r.fail("measured_sizes_mib[" + std::to_string(i) + "]", std::to_string((*sizes)[i]), "sizes must ascend");
    for (double mib : *sizes) l.measured_sizes_bytes.push_back(mib * 1024.0 * 1024.0);
  }
  const std::pair<const char*, std::vector<double>*> curves[] = {
      {"measured_all_reduce_busbw_gb_per_s", &l.measured_all_reduce_busbw},
      {"measured_all_gather_busbw_gb_per_s", &l.measured_all_gather_busbw},
      {"measured_reduce_scatter_busbw_gb_per_s", &l.measured_reduce_scatter_busbw}};
  for (const auto& [key, out] : curves) {
    const auto v = r.numbers(key, 0, kMaxRate, true);
    if (!v) continue;
    if (!l.has_measured_ring())
      r.fail(key, "(array)", "needs measured_sizes_mib, the message sizes it was measured at");
    if (v->size() != l.measured_sizes_bytes.size())
      r.fail(key, std::to_string(v->size()) + " values",
             "one per size of measured_sizes_mib (" + std::to_string(l.measured_sizes_bytes.size()) + ")");
    for (double gb : *v) out->push_back(gb * units::kGB);
  }
  for (const auto& [what, latency, rate] :
       {std::tuple{"reduce_scatter", &l.reduce_scatter_latency_seconds, &l.reduce_scatter_bytes_per_s},
        std::tuple{"all_gather", &l.all_gather_latency_seconds, &l.all_gather_bytes_per_s}}) {
    *rate = r.number(std::string(what) + "_gb_per_s", 0, kMaxRate, true).value_or(0) * units::kGB;
    *latency = r.number(std::string(what) + "_latency_us", 0, 1e9, false).value_or(0) * 1e-6;
  }
  if (l.has_measured_ring() && l.measured_all_reduce_busbw.empty())
    r.fail("measured_all_reduce_busbw_gb_per_s", "(missing)", "measured_sizes_mib needs at least the all-reduce curve");
  r.reject_unknown(
      "kind, bandwidth_gb_per_s, bandwidth_gbit_per_s, latency_us, protocol_efficiency, "
      "measured_sizes_mib, measured_all_reduce_busbw_gb_per_s, measured_all_gather_busbw_gb_per_s, "
      "measured_reduce_scatter_busbw_gb_per_s, reduce_scatter_gb_per_s, reduce_scatter_latency_us, "
      "all_gather_gb_per_s, all_gather_latency_us");
  return l;
}

}  // namespace

ClusterSpec parse_cluster_toml(std::string_view text, const std::string& source) {
  const toml::table root = parse_toml(text, source);
  TableReader r(root, source, "");
  r.reject_unknown_tables({"device", "intra", "inter"}, "[device], [intra], [inter]");
  ClusterSpec c;
  c.name = r.string("name").value_or(fs::path(source).stem().string());
  c.description = r.string("description").value_or("");
  c.nodes = int(r.integer("nodes", 1, kMaxCount).value_or(1));
  c.devices_per_node = int(r.integer("devices_per_node", 1, kMaxCount).value_or(1));
  c.nics_per_node = int(r.integer("nics_per_node", 1, kMaxCount).value_or(1));
  c.cores_per_node = int(r.integer("cores_per_node", 0, kMaxCount).value_or(0));
  c.comm_cpu_seconds_per_byte = r.number("comm_cpu_ns_per_byte", 0, 1e9, false).value_or(0) * 1e-9;
  c.calibrated = r.boolean("calibrated").value_or(false);
  r.string("calibrated_at");
  r.string("machine");
  const toml::table* dev = r.table("device");
  if (!dev) r.fail("device", "(missing)", "a [device] table is required");
  {
    TableReader d(*dev, source, "device.");
    c.device.name = d.string("name").value_or("device");
    c.device.memory_bytes = memory_bytes(d);
    c.device.peak_flops_fp32 = required_positive(d, "peak_tflops_fp32") * units::kTera;
    c.device.peak_flops_bf16 = required_positive(d, "peak_tflops_bf16") * units::kTera;
    c.device.memory_bytes_per_s = required_positive(d, "memory_bandwidth_gb_per_s") * units::kGB;
    c.device.gemm_efficiency = d.number("gemm_efficiency", 0, 1, true).value_or(1.0);
    c.device.memory_efficiency = d.number("memory_efficiency", 0, 1, true).value_or(1.0);
    c.device.sms = int(d.integer("sms", 0, kMaxCount).value_or(0));
    c.device.gemm_tile_rows = int(d.integer("gemm_tile_rows", 0, kMaxCount).value_or(0));
    c.device.gemm_tile_cols = int(d.integer("gemm_tile_cols", 0, kMaxCount).value_or(0));
    c.device.first_touch_bytes_per_s = d.number("first_touch_gb_per_s", 0, 1e6, true).value_or(0) * units::kGB;
    // The GEMM-rate grid: four arrays of one entry per point.
    const auto mbs = d.numbers("gemm_rate_microbatch", 0, double(kMaxCount), true);
    const auto hs = d.numbers("gemm_rate_hidden", 0, double(kMaxCount), true);
    const auto fs = d.numbers("gemm_rate_ffn", 0, double(kMaxCount), true);
    const auto rates = d.numbers("gemm_rate_gflops", 0, kMaxRate, true);
    // Optional: the forward alone at each point (GemmRatePoint::forward_flops_per_s).
    const auto forwards = d.numbers("gemm_rate_forward_gflops", 0, kMaxRate, true);
    if (forwards && !rates) d.fail("gemm_rate_forward_gflops", "(without a grid)", "needs the grid's four arrays");
    if (mbs || hs || fs || rates) {
      if (!mbs || !hs || !fs || !rates)
        d.fail("gemm_rate_gflops", "(incomplete)",
               "a rate grid needs all four of gemm_rate_microbatch, gemm_rate_hidden, gemm_rate_ffn, gemm_rate_gflops");
      if (hs->size() != mbs->size() || fs->size() != mbs->size() || rates->size() != mbs->size())
        d.fail("gemm_rate_gflops", std::to_string(rates->size()) + " values",
               "one per point: gemm_rate_microbatch has " + std::to_string(mbs->size()));
      for (size_t i = 0; i < mbs->size(); ++i) {
        if ((*mbs)[i] != std::floor((*mbs)[i]) || (*hs)[i] != std::floor((*hs)[i]) || (*fs)[i] != std::floor((*fs)[i]))
          d.fail("gemm_rate_microbatch", "(point " + std::to_string(i) + ")",
                 "microbatch, hidden and ffn are whole numbers");
        c.device.gemm_rates.push_back(
            {int64_t((*mbs)[i]), int64_t((*hs)[i]), int64_t((*fs)[i]), (*rates)[i] * units::kGiga});
      }
      if (forwards && forwards->size() != mbs->size())
        d.fail("gemm_rate_forward_gflops", std::to_string(forwards->size()) + " values",
               "one per point: gemm_rate_microbatch has " + std::to_string(mbs->size()));
      for (size_t i = 0; forwards && i < mbs->size(); ++i)
        c.device.gemm_rates[i].forward_flops_per_s = (*forwards)[i] * units::kGiga;
    }
    d.reject_unknown(
        "name, memory_gb, memory_gib, peak_tflops_fp32, peak_tflops_bf16, memory_bandwidth_gb_per_s, "
        "gemm_efficiency, memory_efficiency, sms, gemm_tile_rows, gemm_tile_cols, first_touch_gb_per_s, "
        "gemm_rate_microbatch, gemm_rate_hidden, gemm_rate_ffn, gemm_rate_gflops, gemm_rate_forward_gflops");
  }
  c.intra = read_link(r.table("intra"), source, "intra");
  c.inter = read_link(r.table("inter"), source, "inter");
  r.reject_unknown(
      "name, description, nodes, devices_per_node, nics_per_node, cores_per_node, comm_cpu_ns_per_byte, calibrated, "
      "calibrated_at, machine, [device], [intra], [inter]");
  validate(c, source);
  return c;
}

std::string cluster_to_toml(const ClusterSpec& c, const std::string& header_comment) {
  std::ostringstream o;
  o.precision(10);
  std::istringstream lines(header_comment);
  for (std::string line; std::getline(lines, line);) o << "# " << line << "\n";
  auto num = [](double v) {
    if (std::isinf(v)) return std::string("inf");
    std::ostringstream s;
    s.precision(10);
    s << v;
    std::string out = s.str();
    if (out.find_first_of(".e") == std::string::npos) out += ".0";
    return out;
  };
  o << "name = \"" << c.name << "\"\n";
  if (!c.description.empty()) o << "description = \"" << c.description << "\"\n";
  o << "nodes = " << c.nodes << "\ndevices_per_node = " << c.devices_per_node << "\nnics_per_node = " << c.nics_per_node
    << "\ncores_per_node = " << c.cores_per_node
    << "\ncomm_cpu_ns_per_byte = " << num(c.comm_cpu_seconds_per_byte * 1e9)
    << "\ncalibrated = " << (c.calibrated ? "true" : "false") << "\n\n[device]\nname = \"" << c.device.name
    << "\"\nmemory_gb = " << num(c.device.memory_bytes / units::kGB)
    << "\npeak_tflops_fp32 = " << num(c.device.peak_flops_fp32 / units::kTera)
    << "\npeak_tflops_bf16 = " << num(c.device.peak_flops_bf16 / units::kTera)
    << "\nmemory_bandwidth_gb_per_s = " << num(c.device.memory_bytes_per_s / units::kGB)
    << "\ngemm_efficiency = " << num(c.device.gemm_efficiency) << "\n";
  if (c.device.memory_efficiency != 1.0) o << "memory_efficiency = " << num(c.device.memory_efficiency) << "\n";
  if (c.device.first_touch_bytes_per_s > 0)
    o << "first_touch_gb_per_s = " << num(c.device.first_touch_bytes_per_s / units::kGB) << "\n";
  if (!c.device.gemm_rates.empty()) {
    auto list = [&](auto field) {
      std::string out = "[";
      for (size_t i = 0; i < c.device.gemm_rates.size(); ++i) out += (i ? ", " : "") + field(c.device.gemm_rates[i]);
      return out + "]";
    };
    o << "gemm_rate_microbatch = " << list([](const GemmRatePoint& p) { return std::to_string(p.microbatch); })
      << "\ngemm_rate_hidden = " << list([](const GemmRatePoint& p) { return std::to_string(p.hidden); })
      << "\ngemm_rate_ffn = " << list([](const GemmRatePoint& p) { return std::to_string(p.ffn); })
      << "\ngemm_rate_gflops = " << list([&](const GemmRatePoint& p) { return num(p.flops_per_s / units::kGiga); })
      << "\n";
    const auto& g = c.device.gemm_rates;
    if (std::all_of(g.begin(), g.end(), [](const GemmRatePoint& p) { return p.forward_flops_per_s > 0; }))
      o << "gemm_rate_forward_gflops = "
        << list([&](const GemmRatePoint& p) { return num(p.forward_flops_per_s / units::kGiga); }) << "\n";
  }
  if (c.device.sms > 0)
    o << "sms = " << c.device.sms << "\ngemm_tile_rows = " << c.device.gemm_tile_rows
      << "\ngemm_tile_cols = " << c.device.gemm_tile_cols << "\n";
  for (const auto& [name, l] : {std::pair{"intra", c.intra}, std::pair{"inter", c.inter}}) {
    o << "\n[" << name << "]\nkind = \"" << l.kind << "\"\nbandwidth_gb_per_s = " << num(l.bytes_per_s / units::kGB)
      << "\nlatency_us = " << num(l.latency_seconds * 1e6) << "\n";
    if (l.protocol_efficiency != 1.0) o << "protocol_efficiency = " << num(l.protocol_efficiency) << "\n";
    for (const auto& [what, latency, rate] :
         {std::tuple{"reduce_scatter", l.reduce_scatter_latency_seconds, l.reduce_scatter_bytes_per_s},
          std::tuple{"all_gather", l.all_gather_latency_seconds, l.all_gather_bytes_per_s}})
      if (rate > 0)
        o << what << "_gb_per_s = " << num(rate / units::kGB) << "\n"
          << what << "_latency_us = " << num(latency * 1e6) << "\n";
    if (l.has_measured_ring()) {
      auto list = [&](const std::vector<double>& v, double unit) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + num(v[i] / unit);
        return out + "]";
      };
      o << "measured_sizes_mib = " << list(l.measured_sizes_bytes, 1024.0 * 1024.0) << "\n";
      for (const auto& [key, v] :
           {std::pair{"measured_all_reduce_busbw_gb_per_s", &l.measured_all_reduce_busbw},
            std::pair{"measured_all_gather_busbw_gb_per_s", &l.measured_all_gather_busbw},
            std::pair{"measured_reduce_scatter_busbw_gb_per_s", &l.measured_reduce_scatter_busbw}})
        if (!v->empty()) o << key << " = " << list(*v, units::kGB) << "\n";
    }
  }
  return o.str();
}

std::vector<std::string> model_preset_names() { return embedded_preset_names("models"); }
std::vector<std::string> cluster_preset_names() { return embedded_preset_names("clusters"); }

ModelSpec load_model(std::string_view name) {
  return load_named<ModelSpec>(name, "--model", "models", model_preset_names(), parse_model_toml);
}

ClusterSpec load_cluster(std::string_view name) {
  return load_named<ClusterSpec>(name, "--cluster", "clusters", cluster_preset_names(), parse_cluster_toml);
}

ModelSpec params_model(double param_count) {
  ModelSpec m;
  m.name = "params";
  m.kind = ModelKind::kParams;
  m.param_count = param_count;
  validate(m, "--params");
  return m;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j{{"name", m.name}, {"kind", m.kind_name()}, {"total_params", m.total_params()}};
  if (m.has_layers()) {
    j["layers"] = m.layers;
    j["hidden"] = m.hidden;
    j["ffn"] = m.ffn;
    j["params_per_block"] = m.params_per_block();
    j["forward_flops_per_token"] = m.forward_flops_per_token();
    j["backward_flops_per_token"] = m.backward_flops_per_token();
    j["largest_operator_params"] = m.largest_operator_params();
    j["largest_layer_params"] = m.largest_layer_params();
  }
  if (m.kind == ModelKind::kTransformer) {
    j["heads"] = m.heads;
    j["kv_heads"] = m.kv_heads > 0 ? m.kv_heads : m.heads;
    j["seq_len"] = m.seq_len;
    j["vocab"] = m.vocab;
  }
  if (m.kind == ModelKind::kMlp) j["classes"] = m.classes;
  return j;
}

nlohmann::json to_json(const ClusterSpec& c) {
  auto finite = [](double v) { return std::isinf(v) ? nlohmann::json("inf") : nlohmann::json(v); };
  nlohmann::json j = {{"name", c.name},
                      {"nodes", c.nodes},
                      {"devices_per_node", c.devices_per_node},
                      {"devices", c.devices()},
                      {"cores_per_node", c.cores_per_node},
                      {"comm_cpu_seconds_per_byte", c.comm_cpu_seconds_per_byte},
                      {"calibrated", c.calibrated},
                      {"device",
                       {{"name", c.device.name},
                        {"memory_bytes", c.device.memory_bytes},
                        {"peak_flops_fp32", c.device.peak_flops_fp32},
                        {"peak_flops_bf16", c.device.peak_flops_bf16},
                        {"memory_bytes_per_s", c.device.memory_bytes_per_s},
                        {"gemm_efficiency", c.device.gemm_efficiency},
                        {"memory_efficiency", c.device.memory_efficiency},
                        {"first_touch_bytes_per_s", c.device.first_touch_bytes_per_s}}},
                      {"intra",
                       {{"kind", c.intra.kind},
                        {"bytes_per_s", finite(c.intra.bytes_per_s)},
                        {"latency_seconds", c.intra.latency_seconds},
                        {"protocol_efficiency", c.intra.protocol_efficiency}}},
                      {"inter",
                       {{"kind", c.inter.kind},
                        {"bytes_per_s", finite(c.inter.bytes_per_s)},
                        {"latency_seconds", c.inter.latency_seconds},
                        {"protocol_efficiency", c.inter.protocol_efficiency},
                        {"nics_per_node", c.nics_per_node}}}};
  if (!c.device.gemm_rates.empty()) {
    nlohmann::json grid = nlohmann::json::array();
    for (const GemmRatePoint& p : c.device.gemm_rates)
      grid.push_back({{"microbatch", p.microbatch},
                      {"hidden", p.hidden},
                      {"ffn", p.ffn},
                      {"flops_per_s", p.flops_per_s},
                      {"forward_flops_per_s", p.forward_flops_per_s}});
    j["device"]["gemm_rates"] = grid;
  }
  return j;
}

nlohmann::json to_json(const Plan& p) {
  return {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"zero", p.zero},
          {"mb", p.microbatch},
          {"microbatches", p.microbatches},
          {"gbs", p.global_batch},
          {"schedule", std::string(to_string(p.schedule))},
          {"v", p.v},
          {"recompute", std::string(to_string(p.recompute))},
          {"sp", p.sequence_parallel ? "on" : "off"},
          {"precision", std::string(to_string(p.precision))},
          {"optimizer", std::string(to_string(p.optimizer))},
          {"bucket_bytes", p.bucket_bytes},
          {"name", p.short_name()},
          {"text", p.to_string()}};
}

nlohmann::json to_json(const MemoryLedger& l) {
  return {{"rank", l.rank},
          {"stage", l.stage},
          {"params_held", l.params_held},
          {"inflight_microbatches", l.inflight_microbatches},
          {"params_bytes", l.params_bytes},
          {"grads_bytes", l.grads_bytes},
          {"optimizer_bytes", l.optimizer_bytes},
          {"activations_bytes", l.activations_bytes},
          {"temp_bytes", l.temp_bytes},
          {"total_bytes", l.total_bytes()},
          {"device_bytes", l.device_bytes},
          {"fits", l.fits()}};
}

nlohmann::json to_json(const RuleInputs& in, const RuleVerdict& v) {
  return {{"params_bytes", in.params_bytes},
          {"grads_bytes", in.grads_bytes},
          {"optimizer_bytes", in.optimizer_bytes},
          {"activations_bytes", in.activations_bytes},
          {"largest_layer_bytes", in.largest_layer_bytes},
          {"device_bytes", in.device_bytes},
          {"replica_bytes", v.replica_bytes},
          {"ddp_fits", v.ddp_fits},
          {"shard_model_state", v.shard_model_state},
          {"tensor_split_needed", v.tensor_split_needed},
          {"pipeline_candidate", v.pipeline_candidate},
          {"blocker", v.blocker},
          {"candidates", v.candidates}};
}

}  // namespace parlab::strategy
