DROP FUNCTION fresh(boolean);
