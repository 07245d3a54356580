-- parlab results database: the current schema, version 5.
--
-- This file is what applying every step in db/migrations/ to an empty file produces (a test
-- checks it). Existing databases are upgraded by those steps, never by this file; it is here to
-- be read, and `PRAGMA user_version` below is the version it describes.
--
-- Timestamps are UTC ISO-8601 text with milliseconds ("2026-11-29T08:50:42.123Z") so that they
-- sort as text and read as dates in the sqlite3 shell.

-- ---- v1 -------------------------------------------------------------------------------------

CREATE TABLE experiments (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE CHECK (name <> ''),
  file        TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- One analytic estimate, simulation or measured training job. pid + pid_start_ticks + host name
-- the owning process, so that a run left 'running' by a process that no longer exists can be
-- marked 'killed' (start ticks guard against a recycled pid).
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  experiment_id    INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
  kind             TEXT NOT NULL CHECK (kind IN ('analytic', 'simulated', 'measured')),
  model            TEXT NOT NULL DEFAULT '',
  cluster          TEXT NOT NULL DEFAULT '',
  plan             TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(plan)),
  world_size       INTEGER NOT NULL CHECK (world_size >= 1),
  seed             INTEGER NOT NULL DEFAULT 0,
  software_version TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'running'
                   CHECK (status IN ('running', 'completed', 'failed', 'killed')),
  started_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  ended_at         TEXT,
  host             TEXT NOT NULL DEFAULT '',
  pid              INTEGER,
  pid_start_ticks  INTEGER,
  notes            TEXT NOT NULL DEFAULT ''
);

CREATE TABLE run_params (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL CHECK (key <> ''),
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- One row per (step, rank). step_seconds is the wall time of the whole optimizer step; the
-- parts need not sum to it (overlapped communication is not exposed). loss is NULL where no
-- loss exists (analytic runs).
CREATE TABLE step_timings (
  run_id               INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step                 INTEGER NOT NULL CHECK (step >= 0),
  rank                 INTEGER NOT NULL CHECK (rank >= 0),
  data_seconds         REAL NOT NULL DEFAULT 0,
  forward_seconds      REAL NOT NULL DEFAULT 0,
  backward_seconds     REAL NOT NULL DEFAULT 0,
  exposed_comm_seconds REAL NOT NULL DEFAULT 0,
  optimizer_seconds    REAL NOT NULL DEFAULT 0,
  idle_seconds         REAL NOT NULL DEFAULT 0,
  step_seconds         REAL NOT NULL CHECK (step_seconds >= 0),
  loss                 REAL,
  samples              INTEGER NOT NULL DEFAULT 0 CHECK (samples >= 0),
  -- v5 (0005_step_end_times.sql): when the rank finished the step (wall clock, epoch seconds)
  end_seconds          REAL,
  PRIMARY KEY (run_id, step, rank)
) WITHOUT ROWID;

-- One collective (or point-to-point op) as one rank saw it; seq is that rank's call counter.
-- bytes follows nccl-tests (strategy/collectives.h); group_ranks is the n of the busbw factor.
CREATE TABLE collectives (
  run_id             INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank               INTEGER NOT NULL CHECK (rank >= 0),
  seq                INTEGER NOT NULL CHECK (seq >= 0),
  op                 TEXT NOT NULL CHECK (op IN ('all-reduce', 'reduce-scatter', 'all-gather',
                       'broadcast', 'reduce', 'all-to-all', 'send', 'recv', 'barrier')),
  group_name         TEXT NOT NULL DEFAULT 'world',
  bytes              INTEGER NOT NULL CHECK (bytes >= 0),
  group_ranks        INTEGER NOT NULL CHECK (group_ranks >= 1),
  start_seconds      REAL,
  seconds            REAL NOT NULL CHECK (seconds >= 0),
  algbw_bytes_per_s  REAL,
  busbw_bytes_per_s  REAL,
  tag                TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, rank, seq)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
  id           INTEGER PRIMARY KEY,
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step         INTEGER NOT NULL CHECK (step >= 0),
  path         TEXT NOT NULL,
  checksum     TEXT NOT NULL DEFAULT '',
  bytes        INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),
  save_seconds REAL NOT NULL DEFAULT 0,
  verified     INTEGER NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (run_id, step, path)
);

-- Something went wrong and (maybe) was recovered from. rank/step are NULL when the incident
-- concerns the whole job; detection_seconds is fault-to-detection, restart_seconds
-- detection-to-training-again, steps_lost the steps redone after resuming.
CREATE TABLE incidents (
  id                INTEGER PRIMARY KEY,
  run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind              TEXT NOT NULL CHECK (kind IN ('crash', 'killed', 'lost', 'unhealthy', 'hang',
                      'straggler', 'nan', 'oom', 'network', 'checkpoint_corrupt', 'other')),
  rank              INTEGER CHECK (rank >= 0),
  step              INTEGER CHECK (step >= 0),
  detail            TEXT NOT NULL DEFAULT '',
  detected_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  detection_seconds REAL,
  restart_seconds   REAL,
  steps_lost        INTEGER CHECK (steps_lost >= 0)
);

-- A checked claim (kill-and-resume is bit-identical, sim agrees with measured on bytes, ...)
-- with the inputs it was checked on and the evidence a grader can re-read.
CREATE TABLE proofs (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  experiment_id INTEGER REFERENCES experiments(id) ON DELETE CASCADE,
  kind          TEXT NOT NULL CHECK (kind <> ''),
  inputs        TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(inputs)),
  result        TEXT NOT NULL DEFAULT '',
  passed        INTEGER NOT NULL CHECK (passed IN (0, 1)),
  evidence      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(evidence)),
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  -- v4 (0004_proof_chain.sql): who wrote the row and its place in the digest chain
  software_version TEXT NOT NULL DEFAULT '',
  binary_hash      TEXT NOT NULL DEFAULT '',
  machine          TEXT NOT NULL DEFAULT '',
  prev_digest      TEXT,
  digest           TEXT,
  CHECK (run_id IS NOT NULL OR experiment_id IS NOT NULL)
);

-- ---- v2 -------------------------------------------------------------------------------------

-- Measured compute and link rates of one machine; the cost model and the simulator fit to the
-- latest one.
CREATE TABLE calibrations (
  id         INTEGER PRIMARY KEY,
  machine    TEXT NOT NULL CHECK (machine <> ''),
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  json       TEXT NOT NULL CHECK (json_valid(json))
);

-- Derived figures of one run (speedup, efficiency, tokens_per_s, ...): one number per key.
CREATE TABLE run_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL CHECK (key <> ''),
  value  REAL NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

CREATE INDEX runs_by_experiment ON runs(experiment_id, id);
CREATE INDEX runs_by_status ON runs(status);
CREATE INDEX incidents_by_run ON incidents(run_id, id);
CREATE INDEX proofs_by_run ON proofs(run_id, id);
CREATE INDEX proofs_by_experiment ON proofs(experiment_id, id);
CREATE INDEX calibrations_by_machine ON calibrations(machine, created_at, id);

-- ---- v3 -------------------------------------------------------------------------------------

CREATE TABLE predictions (
  id             INTEGER PRIMARY KEY,
  run_id         INTEGER REFERENCES runs(id) ON DELETE SET NULL,  -- the run that revealed it
  experiment_id  INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
  learner        TEXT NOT NULL DEFAULT '',
  quantity       TEXT NOT NULL CHECK (quantity <> ''),            -- 'speedup', 'step_seconds', ...
  source         TEXT NOT NULL DEFAULT 'simulated'
                 CHECK (source IN ('analytic', 'simulated', 'measured')),
  model          TEXT NOT NULL DEFAULT '',
  cluster        TEXT NOT NULL DEFAULT '',
  plan           TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(plan)),
  world_size     INTEGER NOT NULL CHECK (world_size >= 1),
  predicted      REAL NOT NULL,
  reason         TEXT NOT NULL DEFAULT '',
  predicted_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  revealed       REAL,
  revealed_at    TEXT,
  CHECK ((revealed IS NULL) = (revealed_at IS NULL))
);

CREATE INDEX predictions_by_run ON predictions(run_id, id);

-- ---- v4 -------------------------------------------------------------------------------------

-- The proofs table's provenance and digest columns (above, marked v4): see
-- db/migrations/0004_proof_chain.sql and db/proof_chain.h.

-- ---- v5 -------------------------------------------------------------------------------------

-- The step_timings table's end_seconds (above, marked v5): see db/migrations/0005_step_end_times.sql.

-- ---- v6 -------------------------------------------------------------------------------------
-- The incidents table's kinds 'lost' and 'unhealthy' (above): see
-- db/migrations/0006_incident_kinds.sql.

PRAGMA user_version = 6;
