DROP TABLE retired_builds;
ALTER TABLE workers DROP COLUMN build_id;
ALTER TABLE runs DROP COLUMN build_id;
