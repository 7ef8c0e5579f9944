DROP TABLE operations;
DROP TABLE audit_log;
DROP TABLE api_tokens;
