#include "db/migrate.h"

#include <string>

#include "db/embedded_sql.h"
#include "db/sqlite.h"
#include "db/transaction.h"

namespace parlab::db {

int latest_schema_version() { return static_cast<int>(migrations().size()); }

namespace {

void check_not_newer(const Connection& connection, int found, int target) {
  if (found > target) {
    throw SchemaError(connection.path().string() + ": schema version " + std::to_string(found) +
                          " is newer than this parlab understands (" + std::to_string(target) +
                          "); use a newer parlab or another database file",
                      0, 0);
  }
}

// user_version 0 with tables in it is somebody else's SQLite file: leave it alone.
void check_is_ours(Connection& connection, int found) {
  if (found != 0) return;
  Statement s = connection.statement("SELECT count(*) FROM sqlite_schema");
  s.step_one();
  if (s.int64(0) != 0) {
    throw SchemaError(
        connection.path().string() + ": not a parlab results database (it has tables but no schema version)", 0, 0);
  }
}

}  // namespace

int migrate(Connection& connection, int target_version) {
  const int latest = latest_schema_version();
  if (target_version < 0) target_version = latest;
  if (target_version > latest) {
    throw SchemaError("cannot migrate to schema version " + std::to_string(target_version) +
                          ": this parlab knows versions up to " + std::to_string(latest),
                      0, 0);
  }
  const int found = connection.user_version();
  check_not_newer(connection, found, target_version);
  // Whether the file is ours is asked under the lock only (below): read here, a version of 0
  // may be stale by the time the tables are counted -- another process may just have committed
  // its first migration, tables and version together -- and a fresh file shared by processes
  // that open it at once was refused as somebody else's.
  for (int version = found + 1; version <= target_version; ++version) {
    Transaction tx(connection);
    // Another process may have applied this step between our read and our lock.
    const int now = connection.user_version();
    if (now >= version) continue;
    check_is_ours(connection, now);
    const Migration& step = migrations()[static_cast<std::size_t>(version - 1)];
    connection.exec_script(step.sql);
    // PRAGMA takes no bound parameters; the value is our own integer, never user input.
    connection.exec_script("PRAGMA user_version = " + std::to_string(version));
    tx.commit();
  }
  return found;
}

}  // namespace parlab::db
