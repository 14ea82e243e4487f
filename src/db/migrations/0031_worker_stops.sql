-- A worker that stops cleanly leaves a stop record.
--
-- Until now a clean stop deleted the worker's snapshots (horsies_worker_states): left behind, the last one aged into
-- a stale worker, a clean stop looking like a crash, and kept counting as serving its queues and task names for the
-- live window. Deleting them made the stop invisible instead. The stop now deletes the snapshots and writes one row
-- here, in one statement: the readers of live workers (the claim side's caps, "no worker", metrics) read the
-- snapshots as before and never see a stopped worker, and the dashboard lists it as stopped beside the live and
-- stale ones. One row per worker id; retention deletes rows older than workerStateRetentionHours, as it does
-- snapshots.

CREATE TABLE {{schema}}.horsies_worker_stops (
  worker_id varchar(255) COLLATE "C" NOT NULL,
  hostname varchar(255) COLLATE "C",
  pid integer,
  queues varchar(100)[],
  -- The worker's own clock, as in its snapshots.
  worker_started_at timestamptz,
  stopped_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_worker_stops_pkey PRIMARY KEY (worker_id)
);

-- The dashboard's recent stops and retention's old ones.
CREATE INDEX horsies_worker_stops_stopped_at_idx ON {{schema}}.horsies_worker_stops (stopped_at);
