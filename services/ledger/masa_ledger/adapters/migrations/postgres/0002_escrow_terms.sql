-- The terms a game's stakes were bound under (its rake and payout table, as JSON), fixed when
-- the table-engine binds the holds, so that a game is paid by what its lobby said and never by
-- what a result claims. Empty for an account that is not a bound escrow.
ALTER TABLE accounts ADD COLUMN rule TEXT NOT NULL DEFAULT '';
