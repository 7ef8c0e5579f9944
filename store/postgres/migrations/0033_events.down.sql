DROP TABLE event_firings;
DROP TABLE triggers;
DROP TABLE sent_events;
