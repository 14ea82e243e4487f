-- Capacity: paused queues, and the task names each worker serves (to spot tasks no worker can run).

CREATE TABLE {{schema}}.horsies_queue_state (
  queue_name varchar(100) PRIMARY KEY,
  paused boolean NOT NULL DEFAULT false,
  paused_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_queue_state_paused_check CHECK (paused = (paused_at IS NOT NULL))
);

ALTER TABLE {{schema}}.horsies_worker_states ADD COLUMN task_names varchar(255)[];
