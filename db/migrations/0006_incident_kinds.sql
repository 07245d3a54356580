-- Schema v6: two more incident kinds, so the runtime's kinds reach the database without loss.
-- 'lost': a rank's device is gone with it (the job continues with fewer workers), stored as
-- 'killed' before v6; 'unhealthy': the health hook failed a running rank, stored as 'hang'
-- before v6. A CHECK constraint cannot be altered in SQLite: the table is rebuilt with its rows
-- (ids kept), under its own name, and its index made again.

ALTER TABLE incidents RENAME TO incidents_v5;

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

INSERT INTO incidents (id, run_id, kind, rank, step, detail, detected_at, detection_seconds, restart_seconds,
                       steps_lost)
  SELECT id, run_id, kind, rank, step, detail, detected_at, detection_seconds, restart_seconds, steps_lost
  FROM incidents_v5;

DROP TABLE incidents_v5;

CREATE INDEX incidents_by_run ON incidents(run_id, id);
