DROP TABLE event_waits;
