DROP TABLE definitions;
