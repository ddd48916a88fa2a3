// The three services the gateway exposes, over the Connect protocol on the page's own origin.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { LedgerService } from "./gen/masa/ledger/v1/ledger_pb";
import { MatchmakingService } from "./gen/masa/matchmaking/v1/matchmaking_pb";
import { TableService } from "./gen/masa/table/v1/table_pb";
import { bearerToken } from "./identity";

// A unary call refused for its token (it expired early, or the server's keys changed) is sent
// once more with a fresh one; a stream is resumed by its reader instead (table/follow.ts).
const bearer: Interceptor = (next) => async (request) => {
  request.header.set("authorization", `Bearer ${await bearerToken()}`);
  try {
    return await next(request);
  } catch (error) {
    if (request.stream || ConnectError.from(error).code !== Code.Unauthenticated) {
      throw error;
    }
    request.header.set("authorization", `Bearer ${await bearerToken(true)}`);
    return await next(request);
  }
};

const transport = createConnectTransport({
  baseUrl: window.location.origin,
  useBinaryFormat: true,
  interceptors: [bearer],
});

export const tables = createClient(TableService, transport);
export const matchmaking = createClient(MatchmakingService, transport);
export const ledger = createClient(LedgerService, transport);

/** A fresh idempotency key (AIP-155); reuse one only to retry the very same request. Made
 * from getRandomValues, which unlike randomUUID also exists on a plain-http LAN address. */
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}
