#pragma once
// Schema versions live in `PRAGMA user_version`: 0 is an empty file, migrations()[i] takes i to
// i + 1. Each step and its version bump commit together, under BEGIN IMMEDIATE, so processes that
// open the same new file at once apply every step exactly once.
namespace parlab::db {

class Connection;

// The version this build of parlab writes: migrations().size().
int latest_schema_version();

// Brings the database up to `target_version` (default: the latest). Returns the version found
// before migrating. Throws SchemaError when the file is newer than `target_version` (written by a
// newer parlab) and DbError when a step fails (that step is rolled back; earlier ones stay).
int migrate(Connection& connection, int target_version = -1);

}  // namespace parlab::db
