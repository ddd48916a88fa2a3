-- The ledger's tables (P-30, P-31). Amounts are chips, times are microseconds since the epoch.
-- The database itself refuses what must never happen: a negative wallet or escrow, a hold
-- reserving more than its wallet has, a stake posted twice, an edited or deleted transfer, a
-- settled game settled again, a hold moving back out of a final state.

CREATE TABLE accounts (
  account_id TEXT COLLATE "C" PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('player', 'escrow', 'house', 'issuer')),
  player_id TEXT NOT NULL DEFAULT '',
  table_id TEXT NOT NULL DEFAULT '',
  game_no BIGINT NOT NULL DEFAULT 0,
  stake BIGINT NOT NULL DEFAULT 0 CHECK (stake >= 0),
  balance BIGINT NOT NULL DEFAULT 0
    CHECK (balance BETWEEN -1000000000000000000 AND 1000000000000000000),
  held BIGINT NOT NULL DEFAULT 0,
  pending_stakes BIGINT NOT NULL DEFAULT 0,
  -- An escrow's game once it is settled or voided; empty while it is open, and for others.
  closed TEXT NOT NULL DEFAULT '' CHECK (closed IN ('', 'settled', 'voided')),
  created_us BIGINT NOT NULL,
  CHECK (kind = 'issuer' OR balance >= 0),
  CHECK (held = 0 OR (kind = 'player' AND held > 0 AND held <= balance)),
  CHECK (pending_stakes >= 0 AND (kind = 'escrow' OR pending_stakes = 0)),
  CHECK (closed = '' OR (kind = 'escrow' AND pending_stakes = 0))
);

INSERT INTO accounts (account_id, kind, created_us) VALUES ('issuer', 'issuer', 0), ('house', 'house', 0);

-- Keyed by the id the caller chose; seq orders a player's holds for listing.
CREATE TABLE holds (
  hold_id TEXT COLLATE "C" PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  player_id TEXT NOT NULL,
  account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts (account_id),
  amount BIGINT NOT NULL CHECK (amount > 0),
  lobby_id TEXT NOT NULL DEFAULT '',
  ticket_id TEXT NOT NULL DEFAULT '',
  ttl_us BIGINT NOT NULL CHECK (ttl_us > 0),
  state TEXT NOT NULL CHECK (state IN ('held', 'bound', 'posted', 'released', 'expired', 'voided')),
  created_us BIGINT NOT NULL,
  expire_us BIGINT NOT NULL,
  table_id TEXT NOT NULL DEFAULT '',
  game_no BIGINT NOT NULL DEFAULT 0,
  closed_us BIGINT,
  reason TEXT NOT NULL DEFAULT '',
  CHECK ((state IN ('held', 'released', 'expired')) = (table_id = '')),
  CHECK ((state IN ('held', 'bound')) = (closed_us IS NULL))
);

CREATE INDEX holds_due ON holds (expire_us) WHERE state = 'held';
CREATE INDEX holds_game ON holds (table_id, game_no);
CREATE INDEX holds_player ON holds (player_id, seq);

CREATE FUNCTION holds_move_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT (
      (OLD.state = 'held' AND NEW.state IN ('bound', 'released', 'expired'))
      OR (OLD.state = 'bound' AND NEW.state IN ('posted', 'voided')
          AND NEW.table_id = OLD.table_id AND NEW.game_no = OLD.game_no)
    )
    OR NEW.hold_id IS DISTINCT FROM OLD.hold_id OR NEW.player_id IS DISTINCT FROM OLD.player_id
    OR NEW.account_id IS DISTINCT FROM OLD.account_id OR NEW.amount IS DISTINCT FROM OLD.amount
  THEN
    RAISE EXCEPTION 'a hold only moves forward: held, then bound, then posted or voided'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER holds_move_forward BEFORE UPDATE ON holds
  FOR EACH ROW EXECUTE FUNCTION holds_move_forward();

CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% rows are never %d', TG_TABLE_NAME, lower(TG_OP)
    USING ERRCODE = 'check_violation';
END
$$;

CREATE TRIGGER holds_never_deleted BEFORE DELETE ON holds
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- Keyed by the transfer id, its idempotency key; seq orders an account's transfers.
CREATE TABLE transfers (
  transfer_id TEXT COLLATE "C" PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  kind TEXT NOT NULL CHECK (kind IN ('grant', 'stake', 'payout', 'rake', 'forfeit')),
  debit_account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts (account_id),
  credit_account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts (account_id),
  amount BIGINT NOT NULL CHECK (amount > 0),
  table_id TEXT NOT NULL DEFAULT '',
  game_no BIGINT NOT NULL DEFAULT 0,
  hold_id TEXT COLLATE "C" UNIQUE REFERENCES holds (hold_id),
  reason TEXT NOT NULL DEFAULT '',
  created_us BIGINT NOT NULL,
  CHECK (debit_account_id <> credit_account_id),
  CHECK ((kind = 'stake') = (hold_id IS NOT NULL))
);

CREATE INDEX transfers_debit ON transfers (debit_account_id, seq);
CREATE INDEX transfers_credit ON transfers (credit_account_id, seq);
CREATE INDEX transfers_game ON transfers (table_id, game_no);

CREATE TRIGGER transfers_immutable BEFORE UPDATE OR DELETE ON transfers
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TABLE settlements (
  table_id TEXT NOT NULL,
  game_no BIGINT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('settled', 'voided')),
  pot BIGINT NOT NULL CHECK (pot >= 0),
  rake BIGINT NOT NULL CHECK (rake >= 0),
  forfeited BIGINT NOT NULL CHECK (forfeited >= 0),
  payouts TEXT NOT NULL,
  hold_ids TEXT NOT NULL,
  rule TEXT NOT NULL,
  event_id TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  closed_us BIGINT NOT NULL,
  PRIMARY KEY (table_id, game_no),
  CHECK (state = 'settled' OR (rake = 0 AND forfeited = 0))
);

CREATE TRIGGER settlements_immutable BEFORE UPDATE OR DELETE ON settlements
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TABLE inbox (
  event_id TEXT PRIMARY KEY,
  table_id TEXT NOT NULL,
  game_no BIGINT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('settled', 'voided', 'already_closed', 'rejected')),
  detail TEXT NOT NULL DEFAULT '',
  received_us BIGINT NOT NULL
);

CREATE INDEX inbox_received ON inbox (received_us);

CREATE TABLE outbox (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id TEXT NOT NULL UNIQUE,
  subject TEXT NOT NULL,
  payload BYTEA NOT NULL,
  created_us BIGINT NOT NULL,
  published_us BIGINT
);

CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_us IS NULL;
CREATE INDEX outbox_published ON outbox (published_us) WHERE published_us IS NOT NULL;
