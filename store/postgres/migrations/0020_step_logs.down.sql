DROP TABLE step_logs;
