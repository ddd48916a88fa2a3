// Who the player is: a name and the development token the gateway minted for it, kept in
// localStorage so that a reload (or a new tab) is the same player at the same seat.

export const PLAYER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$/;

export interface Identity {
  readonly player: string;
  readonly token: string;
  /** Unix seconds on this browser's clock, never the server's: the two may disagree by hours,
   * and a clock ahead would renew before every call, spending the gateway's token rate that
   * every player shares. */
  readonly expiresAt: number;
}

/** The gateway has no development issuer (a deployment): players sign in elsewhere. */
export class NoDevTokens extends Error {}

const STORAGE_KEY = "masa.identity";
// A token is renewed this long before it expires, so that a call never leaves with one that
// expires on the way, and a watch stream rarely outlives its token.
const RENEW_BEFORE_SECONDS = 300;

let current: Identity | null = load();
// The renewal under way and the identity it renews: the callers holding that identity share it.
let renewing: { readonly from: Identity; readonly fresh: Promise<Identity> } | null = null;

function load(): Identity | null {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "null");
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      "player" in parsed &&
      "token" in parsed &&
      "expiresAt" in parsed &&
      typeof parsed.player === "string" &&
      typeof parsed.token === "string" &&
      typeof parsed.expiresAt === "number"
    ) {
      return { player: parsed.player, token: parsed.token, expiresAt: parsed.expiresAt };
    }
  } catch {
    // A value some other page wrote under the key is no identity: ask for the name again.
  }
  return null;
}

export function identity(): Identity | null {
  return current;
}

/** The answer of POST /dev/token. Its expires_at is left unread: it is the server's clock. */
interface TokenAnswer {
  readonly token: string;
  readonly player_id: string;
  /** Seconds the token lives; a gateway older than the field leaves it out. */
  readonly expires_in?: number;
}

/** Ask the gateway for a development token for `player` and keep it. */
export async function signIn(player: string): Promise<Identity> {
  return keep(await mint(player));
}

export function signOut(): void {
  current = null;
  localStorage.removeItem(STORAGE_KEY);
}

/** The token to send now: the kept one, or a fresh one when it expires soon (or `force`, after
 * the server refused it). Concurrent callers share one renewal. */
export async function bearerToken(force = false): Promise<string> {
  const from = current;
  if (from === null) {
    throw new Error("no player is signed in");
  }
  if (!force && from.expiresAt - Date.now() / 1000 > RENEW_BEFORE_SECONDS) {
    return from.token;
  }
  if (renewing?.from !== from) {
    const fresh = renew(from).finally(() => {
      if (renewing?.fresh === fresh) {
        renewing = null;
      }
    });
    renewing = { from, fresh };
  }
  return (await renewing.fresh).token;
}

/** A fresh token for `from`'s player, kept only if `from` is still the player: a sign-out (or
 * another name) while the token was minted must not be undone by its arrival. */
async function renew(from: Identity): Promise<Identity> {
  const fresh = await mint(from.player);
  if (current !== from) {
    throw new Error(`${from.player} signed out while the token was renewed`);
  }
  return keep(fresh);
}

function keep(identity: Identity): Identity {
  current = identity;
  localStorage.setItem(STORAGE_KEY, JSON.stringify(identity));
  return identity;
}

async function mint(player: string): Promise<Identity> {
  // Counted from when the request left, so that the round trip only shortens the token's life.
  const asked = Date.now() / 1000;
  const response = await fetch("/dev/token", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ player }),
  });
  if (response.status === 404) {
    throw new NoDevTokens(
      "this server issues no development tokens: it is a deployment whose players sign in with its identity provider",
    );
  }
  if (!response.ok) {
    throw new Error(`the server refused the name (${response.status}): ${await response.text()}`);
  }
  const answer = (await response.json()) as TokenAnswer;
  return { player: answer.player_id, token: answer.token, expiresAt: asked + lifetimeOf(answer) };
}

/** How long a token lives, in seconds: the answer's expires_in, or else the span between the
 * token's own iat and exp claims; spans, not instants, so the two clocks never meet. */
function lifetimeOf(answer: TokenAnswer): number {
  if (typeof answer.expires_in === "number") {
    return answer.expires_in;
  }
  const claims = claimsOf(answer.token);
  if (
    typeof claims === "object" &&
    claims !== null &&
    "iat" in claims &&
    "exp" in claims &&
    typeof claims.iat === "number" &&
    typeof claims.exp === "number"
  ) {
    return claims.exp - claims.iat;
  }
  throw new Error("the server's token says not how long it lives");
}

/** The JWT's payload (its second, base64url part), unverified: the server checks the token. */
function claimsOf(token: string): unknown {
  const payload = (token.split(".")[1] ?? "").replace(/-/g, "+").replace(/_/g, "/");
  try {
    return JSON.parse(atob(payload));
  } catch {
    return null;
  }
}
