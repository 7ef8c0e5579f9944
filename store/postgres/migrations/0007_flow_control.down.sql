DROP TABLE queue_leases;
DROP TABLE queue_keys;
DROP TABLE queues;
DROP INDEX tasks_flow;
ALTER TABLE tasks DROP COLUMN flow_key;
ALTER TABLE runs DROP COLUMN concurrency_key;
