#pragma once
// RAII write transaction (as SQLiteCpp's Transaction): BEGIN IMMEDIATE on construction, ROLLBACK
// in the destructor unless commit() ran.
//
// IMMEDIATE takes the write lock up front, so two processes never both start reading in a
// transaction and then deadlock upgrading to write (SQLite answers that with an immediate
// SQLITE_BUSY the busy timeout cannot cure). Waiting for the lock honours the busy timeout.
//
//   {
//     Transaction tx(store);
//     store.add_step_timing(run, t);   // joins tx instead of opening its own
//     store.set_run_metric(run, "speedup", 3.7);
//     tx.commit();
//   }                                  // an exception before commit() rolls both back
#include <source_location>

namespace parlab::db {

class Connection;
class ResultsStore;

class Transaction {
 public:
  // Waits up to the busy timeout for the write lock; a DbError (is_busy()) names `where`.
  explicit Transaction(Connection& connection, std::source_location where = std::source_location::current());
  explicit Transaction(ResultsStore& store, std::source_location where = std::source_location::current());
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Makes the writes durable and visible to other connections. Throws DbError on failure, in
  // which case the destructor still rolls back.
  void commit();
  // Rolls back now (idempotent); the destructor then does nothing.
  void rollback() noexcept;

 private:
  Connection& connection_;
  bool open_ = false;
};

}  // namespace parlab::db
