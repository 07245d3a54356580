-- Schema v2: machine calibrations (measured compute and link rates the cost model and the
-- simulator are fitted to), derived per-run metrics, and the indexes the CLI/GUI queries use.

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
