-- The ledger's tables (P-30, P-31). Amounts are chips, times are microseconds since the epoch.
-- The database itself refuses what must never happen: a negative wallet or escrow, a hold
-- reserving more than its wallet has, a stake posted twice, an edited or deleted transfer, a
-- settled game settled again, a hold moving back out of a final state.

CREATE TABLE accounts (
  account_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('player', 'escrow', 'house', 'issuer')),
  player_id TEXT NOT NULL DEFAULT '',
  table_id TEXT NOT NULL DEFAULT '',
  game_no INTEGER NOT NULL DEFAULT 0,
  stake INTEGER NOT NULL DEFAULT 0 CHECK (stake >= 0),
  balance INTEGER NOT NULL DEFAULT 0
    CHECK (balance BETWEEN -1000000000000000000 AND 1000000000000000000),
  held INTEGER NOT NULL DEFAULT 0,
  pending_stakes INTEGER NOT NULL DEFAULT 0,
  -- An escrow's game once it is settled or voided; empty while it is open, and for others.
  closed TEXT NOT NULL DEFAULT '' CHECK (closed IN ('', 'settled', 'voided')),
  created_us INTEGER NOT NULL,
  CHECK (kind = 'issuer' OR balance >= 0),
  CHECK (held = 0 OR (kind = 'player' AND held > 0 AND held <= balance)),
  CHECK (pending_stakes >= 0 AND (kind = 'escrow' OR pending_stakes = 0)),
  CHECK (closed = '' OR (kind = 'escrow' AND pending_stakes = 0))
);

INSERT INTO accounts (account_id, kind, created_us) VALUES ('issuer', 'issuer', 0), ('house', 'house', 0);

CREATE TABLE holds (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  hold_id TEXT NOT NULL UNIQUE,
  player_id TEXT NOT NULL,
  account_id TEXT NOT NULL REFERENCES accounts (account_id),
  amount INTEGER NOT NULL CHECK (amount > 0),
  lobby_id TEXT NOT NULL DEFAULT '',
  ticket_id TEXT NOT NULL DEFAULT '',
  ttl_us INTEGER NOT NULL CHECK (ttl_us > 0),
  state TEXT NOT NULL CHECK (state IN ('held', 'bound', 'posted', 'released', 'expired', 'voided')),
  created_us INTEGER NOT NULL,
  expire_us INTEGER NOT NULL,
  table_id TEXT NOT NULL DEFAULT '',
  game_no INTEGER NOT NULL DEFAULT 0,
  closed_us INTEGER,
  reason TEXT NOT NULL DEFAULT '',
  CHECK ((state IN ('held', 'released', 'expired')) = (table_id = '')),
  CHECK ((state IN ('held', 'bound')) = (closed_us IS NULL))
);

CREATE INDEX holds_due ON holds (expire_us) WHERE state = 'held';
CREATE INDEX holds_game ON holds (table_id, game_no);
CREATE INDEX holds_player ON holds (player_id, seq);

CREATE TRIGGER holds_move_forward BEFORE UPDATE ON holds
WHEN NOT (
    (OLD.state = 'held' AND NEW.state IN ('bound', 'released', 'expired'))
    OR (OLD.state = 'bound' AND NEW.state IN ('posted', 'voided')
        AND NEW.table_id = OLD.table_id AND NEW.game_no = OLD.game_no)
  )
  OR NEW.hold_id IS NOT OLD.hold_id OR NEW.player_id IS NOT OLD.player_id
  OR NEW.account_id IS NOT OLD.account_id OR NEW.amount IS NOT OLD.amount
BEGIN
  SELECT RAISE(ABORT, 'a hold only moves forward: held, then bound, then posted or voided');
END;

CREATE TRIGGER holds_never_deleted BEFORE DELETE ON holds
BEGIN
  SELECT RAISE(ABORT, 'holds are never deleted');
END;

CREATE TABLE transfers (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  transfer_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('grant', 'stake', 'payout', 'rake', 'forfeit')),
  debit_account_id TEXT NOT NULL REFERENCES accounts (account_id),
  credit_account_id TEXT NOT NULL REFERENCES accounts (account_id),
  amount INTEGER NOT NULL CHECK (amount > 0),
  table_id TEXT NOT NULL DEFAULT '',
  game_no INTEGER NOT NULL DEFAULT 0,
  hold_id TEXT UNIQUE REFERENCES holds (hold_id),
  reason TEXT NOT NULL DEFAULT '',
  created_us INTEGER NOT NULL,
  CHECK (debit_account_id <> credit_account_id),
  CHECK ((kind = 'stake') = (hold_id IS NOT NULL))
);

CREATE INDEX transfers_debit ON transfers (debit_account_id, seq);
CREATE INDEX transfers_credit ON transfers (credit_account_id, seq);
CREATE INDEX transfers_game ON transfers (table_id, game_no);

CREATE TRIGGER transfers_never_updated BEFORE UPDATE ON transfers
BEGIN
  SELECT RAISE(ABORT, 'transfers are immutable');
END;

CREATE TRIGGER transfers_never_deleted BEFORE DELETE ON transfers
BEGIN
  SELECT RAISE(ABORT, 'transfers are immutable');
END;

CREATE TABLE settlements (
  table_id TEXT NOT NULL,
  game_no INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('settled', 'voided')),
  pot INTEGER NOT NULL CHECK (pot >= 0),
  rake INTEGER NOT NULL CHECK (rake >= 0),
  forfeited INTEGER NOT NULL CHECK (forfeited >= 0),
  payouts TEXT NOT NULL,
  hold_ids TEXT NOT NULL,
  rule TEXT NOT NULL,
  event_id TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  closed_us INTEGER NOT NULL,
  PRIMARY KEY (table_id, game_no),
  CHECK (state = 'settled' OR (rake = 0 AND forfeited = 0))
);

CREATE TRIGGER settlements_never_updated BEFORE UPDATE ON settlements
BEGIN
  SELECT RAISE(ABORT, 'a game is settled or voided once');
END;

CREATE TRIGGER settlements_never_deleted BEFORE DELETE ON settlements
BEGIN
  SELECT RAISE(ABORT, 'a game is settled or voided once');
END;

CREATE TABLE inbox (
  event_id TEXT PRIMARY KEY,
  table_id TEXT NOT NULL,
  game_no INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('settled', 'voided', 'already_closed', 'rejected')),
  detail TEXT NOT NULL DEFAULT '',
  received_us INTEGER NOT NULL
);

CREATE INDEX inbox_received ON inbox (received_us);

CREATE TABLE outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL UNIQUE,
  subject TEXT NOT NULL,
  payload BLOB NOT NULL,
  created_us INTEGER NOT NULL,
  published_us INTEGER
);

CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_us IS NULL;
CREATE INDEX outbox_published ON outbox (published_us) WHERE published_us IS NOT NULL;
