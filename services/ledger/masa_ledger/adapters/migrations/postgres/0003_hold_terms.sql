-- The terms of the game a stake was placed for (its lobby's rake and payout table, as JSON),
-- fixed by whoever placed it, so that the hold binds under those terms only. Empty for a hold
-- placed before the ledger kept them, which binds under any. They never change afterwards.
ALTER TABLE holds ADD COLUMN rule TEXT NOT NULL DEFAULT '';

CREATE FUNCTION holds_terms_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.rule IS DISTINCT FROM OLD.rule THEN
    RAISE EXCEPTION 'a hold''s terms never change' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER holds_terms_fixed BEFORE UPDATE ON holds
  FOR EACH ROW EXECUTE FUNCTION holds_terms_fixed();
