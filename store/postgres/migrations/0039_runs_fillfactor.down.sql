ALTER TABLE runs SET (fillfactor = 50);
