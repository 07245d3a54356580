#include "db/transaction.h"

#include "db/results_store.h"
#include "db/sqlite.h"

namespace parlab::db {

Transaction::Transaction(Connection& connection, std::source_location where) : connection_(connection) {
  connection_.statement("BEGIN IMMEDIATE", where).run(where);
  open_ = true;
}

Transaction::Transaction(ResultsStore& store, std::source_location where) : Transaction(store.connection(), where) {}

Transaction::~Transaction() { rollback(); }

void Transaction::commit() {
  connection_.statement("COMMIT").run();
  open_ = false;
}

void Transaction::rollback() noexcept {
  if (!open_) return;
  open_ = false;
  // A failed COMMIT or a statement error may already have ended the transaction.
  if (!connection_.in_transaction()) return;
  try {
    connection_.statement("ROLLBACK").run();
  } catch (...) {
    // Nothing sensible to do from a destructor; SQLite rolls back when the connection closes.
  }
}

}  // namespace parlab::db
