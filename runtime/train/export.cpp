#include "runtime/train/export.h"

#include <system_error>

#include "runtime/train/dump.h"
#include "strategy/errors.h"

namespace parlab::train {

std::vector<float> gather_full_params(const Trainer& trainer) {
  const TrainerState& s = trainer.state();
  const model::LabMlp& m = s.model;
  if (s.shards->zero() < 3) {
    const auto p = m.params();
    return {p.begin(), p.end()};
  }
  comm::Communicator& dp = trainer.dp_comm();
  const model::FlatRange all = m.owned_range();
  std::vector<float> full(static_cast<size_t>(all.numel()));
  const std::vector<int64_t> counts = shard_counts(all, all.numel(), dp.size());
  comm::CollectiveOptions o;
  o.timeout = trainer.config().comm_timeout;
  o.tag = "export.params.s" + std::to_string(s.step);
  dp.all_gather_v(s.shards->params(), full, counts, o)->wait();
  return full;
}

uint64_t export_safetensors(const Trainer& trainer, const std::filesystem::path& target) {
  const std::filesystem::path file = std::filesystem::absolute(target);
  const std::vector<float> full = gather_full_params(trainer);
  if (trainer.dp_comm().rank() != 0) return 0;
  const model::MlpShape sh = trainer.state().model.shape();
  const std::map<std::string, std::string> metadata = {
      {"format", "parlab-export"},
      {"step", std::to_string(trainer.state().step)},
      {"plan", trainer.config().plan.to_string()},
      {"model", "hidden=" + std::to_string(sh.hidden) + ",ffn=" + std::to_string(sh.ffn) +
                    ",blocks=" + std::to_string(sh.blocks) + ",classes=" + std::to_string(sh.classes)}};
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const std::filesystem::path tmp = file.string() + ".tmp";
  write_dump_tensors(tmp, trainer.state().model.layout(), 0, full, metadata);
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw RuntimeError("export: cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message());
  return std::filesystem::file_size(file);
}

}  // namespace parlab::train
