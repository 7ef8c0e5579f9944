DROP TABLE tasks;
DROP TABLE events;
DROP TABLE runs;
