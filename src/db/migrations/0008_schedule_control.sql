-- Scheduler control: a pause that every scheduler obeys, and the last failed send of each schedule, kept until a
-- send succeeds so that `horsies schedules list` shows why a schedule is stuck.

ALTER TABLE {{schema}}.horsies_schedule_state
  ADD COLUMN paused boolean NOT NULL DEFAULT false,
  ADD COLUMN last_error text,
  ADD COLUMN last_error_at timestamptz,
  ADD CONSTRAINT horsies_schedule_state_run_count_check CHECK (run_count >= 0);
