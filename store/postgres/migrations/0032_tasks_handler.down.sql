DROP INDEX tasks_handler;
