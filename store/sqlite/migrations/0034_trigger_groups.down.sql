DROP TABLE trigger_windows;
DROP TABLE trigger_group_events;
DROP TABLE trigger_groups;
ALTER TABLE triggers DROP COLUMN batch_window_us;
ALTER TABLE triggers DROP COLUMN batch_size;
ALTER TABLE triggers DROP COLUMN throttle_period_us;
ALTER TABLE triggers DROP COLUMN throttle_limit;
ALTER TABLE triggers DROP COLUMN debounce_us;
ALTER TABLE triggers DROP COLUMN group_key;
