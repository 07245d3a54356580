#pragma once
// How the ranks of one job agree during a checkpoint save or load, without the checkpoint library
// depending on the communicator: the training executor implements Coordinator on top of its real
// Communicator (barrier + all-gather of byte strings); tests and benchmarks use LocalGroup, which
// runs W ranks as threads of one process.
//
// Every call is collective: all ranks of the group make the same sequence of calls.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace parlab::checkpoint {

class Coordinator {
 public:
  virtual ~Coordinator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Returns once every rank has called barrier().
  virtual void barrier() = 0;
  // Every rank contributes one string; every rank receives all W strings, indexed by rank.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

// World of one: the same code path as W ranks, with nothing to wait for.
class SoloCoordinator final : public Coordinator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void barrier() override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
};

// W ranks as threads of one process. Create one LocalGroup, then one member(rank) per thread:
//
//   LocalGroup group(4);
//   std::vector<std::thread> ts;
//   for (int r = 0; r < 4; ++r) ts.emplace_back([&, r] { auto c = group.member(r); save(..., c); });
//
// Rounds are numbered so that a fast rank entering round k+1 cannot disturb round k.
class LocalGroup {
 public:
  explicit LocalGroup(int world_size);

  class Member final : public Coordinator {
   public:
    int rank() const override { return rank_; }
    int world_size() const override { return group_->world_size_; }
    void barrier() override { (void)all_gather(std::string()); }
    std::vector<std::string> all_gather(const std::string& mine) override { return group_->exchange(rank_, mine); }

   private:
    friend class LocalGroup;
    Member(LocalGroup* group, int rank) : group_(group), rank_(rank) {}
    LocalGroup* group_;
    int rank_;
  };

  Member member(int rank);

 private:
  std::vector<std::string> exchange(int rank, const std::string& mine);

  const int world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t round_ = 0;  // round being filled
  int arrived_ = 0;     // contributions to the current round
  std::vector<std::string> slots_;
  std::vector<std::string> done_;  // result of the last completed round
};

}  // namespace parlab::checkpoint
