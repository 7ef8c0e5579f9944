-- A claim that lists handlers reads, per queue and handler, the tasks of
-- that handler in claim order and stops at its limit, instead of walking
-- tasks_claim past every task it cannot run (a worker's claim behind a
-- backlog of other handlers' tasks read the whole backlog at every
-- commit: docs/benchmarks.md, "At 200 starts/s both backends fall
-- behind"). A task's handler never changes, so the index costs an entry
-- when a task is created and when it is deleted, and one more when its
-- ready_at changes (a retry), as tasks_claim does.
CREATE INDEX tasks_handler ON tasks (queue, handler, priority DESC, ready_at, id);
