-- Schema v5: when each rank finished each step (wall clock, seconds since the epoch). A measured
-- step time is the job's cadence -- the time between the last rank finishing one step and the
-- last rank finishing the next (experiments/lib/measure.h) -- and a grader recomputes it from
-- these rows. NULL in rows written before v5 and in analytic and simulated runs.

ALTER TABLE step_timings ADD COLUMN end_seconds REAL;
