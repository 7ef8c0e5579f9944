-- An Apply that decides its changes against what this process last wrote,
-- without reading the rows first, sends its whole transaction in one round
-- trip; its first statement locks the rows and checks them with fresh():
-- false (a row changed since) raises SQLSTATE HEPH1, which skips the rest
-- of the transaction, COMMIT included. The store then rolls it back and
-- runs the changes again, reading the rows first.
CREATE FUNCTION fresh(ok boolean) RETURNS boolean
LANGUAGE plpgsql PARALLEL SAFE AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'a run or task changed since this process last saw it; the store applies the change again, reading it first'
            USING ERRCODE = 'HEPH1';
    END IF;
    RETURN true;
END
$$;
