DROP TABLE sessions;
DROP INDEX api_tokens_principal;
ALTER TABLE api_tokens DROP COLUMN options;
ALTER TABLE api_tokens DROP COLUMN principal;
DROP TABLE principals;
