#pragma once
// The SQL of db/schema.sql and db/migrations/*.sql, compiled into the library (embed_sql.cmake)
// so that a parlab binary needs no files beside it to create or upgrade a results database.
#include <span>
#include <string_view>

namespace parlab::db {

// One schema step: applying `sql` to a database at user_version `version - 1` brings it to
// `version`. Steps never change once released; a schema change is a new step.
struct Migration {
  int version;
  std::string_view name;  // file name without extension, e.g. "0002_calibrations_metrics_indexes"
  std::string_view sql;
};

// Every step in order; migrations()[i].version == i + 1.
std::span<const Migration> migrations();

// db/schema.sql: the schema after every step, for readers (and the test that keeps it honest).
std::string_view schema_sql();

}  // namespace parlab::db
