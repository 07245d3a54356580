-- Schema v4: evidence a grader can trust. Every proof row written from v4 on carries what wrote
-- it (software version, the hash of the binary, a machine fingerprint) and a digest of its own
-- content chained to the digest of the proof before it (db/proof_chain.h says exactly what is
-- hashed). ResultsStore::add_proof fills them in the same transaction as the row, so every writer
-- gets them; a row changed afterwards (say with the sqlite3 shell) no longer matches its digest,
-- and a row removed leaves its successor pointing at a digest nobody has.
--
-- Rows written before v4 keep NULL digests: the grader reports them as unchained.

ALTER TABLE proofs ADD COLUMN software_version TEXT NOT NULL DEFAULT '';
ALTER TABLE proofs ADD COLUMN binary_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE proofs ADD COLUMN machine TEXT NOT NULL DEFAULT '';
ALTER TABLE proofs ADD COLUMN prev_digest TEXT;
ALTER TABLE proofs ADD COLUMN digest TEXT;
