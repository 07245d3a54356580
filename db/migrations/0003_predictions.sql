-- Schema v3: predictions a learner made before a result was revealed (the desktop lab's
-- "predict, then reveal"). A row is written when the learner commits to a prediction
-- (revealed is NULL then) and completed when the simulated or measured value is shown; the
-- rubric credits only rows whose predicted_at is earlier than revealed_at.

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
