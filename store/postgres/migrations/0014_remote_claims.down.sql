DROP TABLE remote_claims;
