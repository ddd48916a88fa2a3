-- The terms of the game a stake was placed for (its lobby's rake and payout table, as JSON),
-- fixed by whoever placed it, so that the hold binds under those terms only. Empty for a hold
-- placed before the ledger kept them, which binds under any. They never change afterwards.
ALTER TABLE holds ADD COLUMN rule TEXT NOT NULL DEFAULT '';

CREATE TRIGGER holds_terms_fixed BEFORE UPDATE OF rule ON holds
WHEN NEW.rule IS NOT OLD.rule
BEGIN
  SELECT RAISE(ABORT, 'a hold''s terms never change');
END;
