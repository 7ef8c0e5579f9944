DROP TABLE requests;
