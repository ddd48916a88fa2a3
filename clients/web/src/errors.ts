// What a failed call means: the Connect code plus masa's google.rpc.ErrorInfo, whose reason is
// a rule id for a refused move or a platform reason (masa/common/v1/error.proto). There is no
// google/rpc proto to generate from, so the three fields of ErrorInfo are read by hand.

import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { isRuleId, meaning } from "./rulebook";

export interface Failure {
  readonly code: Code;
  /** The ErrorInfo reason: "E-8", "SEQUENCE_MISMATCH"; "" when the error carried none. */
  readonly reason: string;
  readonly message: string;
  readonly metadata: Readonly<Record<string, string>>;
}

const ERROR_INFO = "google.rpc.ErrorInfo";

export function failureOf(error: unknown): Failure {
  const connect = ConnectError.from(error);
  for (const detail of connect.details) {
    if ("type" in detail && detail.type === ERROR_INFO) {
      const info = decodeErrorInfo(detail.value);
      return { code: connect.code, message: connect.rawMessage, ...info };
    }
  }
  return { code: connect.code, reason: "", message: connect.rawMessage, metadata: {} };
}

/** google.rpc.ErrorInfo: 1 reason, 2 domain (always masa.dev, so unused), 3 metadata map. */
export function decodeErrorInfo(bytes: Uint8Array): Pick<Failure, "reason" | "metadata"> {
  const reader = new BinaryReader(bytes);
  let reason = "";
  const metadata: Record<string, string> = {};
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) {
      reason = reader.string();
    } else if (field === 3 && wireType === WireType.LengthDelimited) {
      const [key, value] = decodeMapEntry(reader.bytes());
      metadata[key] = value;
    } else {
      reader.skip(wireType);
    }
  }
  return { reason, metadata };
}

function decodeMapEntry(bytes: Uint8Array): [string, string] {
  const reader = new BinaryReader(bytes);
  let key = "";
  let value = "";
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) {
      key = reader.string();
    } else if (field === 2 && wireType === WireType.LengthDelimited) {
      value = reader.string();
    } else {
      reader.skip(wireType);
    }
  }
  return [key, value];
}

/** A refused call in plain words: for a move, the rule id, the server's message and what the
 * rule says; `named` puts the players' names where the server says "seat 2". */
export function explain(failure: Failure, named: (text: string) => string = (text) => text): string {
  const message = named(failure.message);
  if (isRuleId(failure.reason)) {
    const what = failure.code === Code.FailedPrecondition ? "not allowed" : "not a valid move";
    const about = meaning(failure.reason);
    return `✗ ${what} (${failure.reason}): ${message}` + (about ? ` — rule ${failure.reason}: ${about}` : "");
  }
  switch (failure.reason) {
    case "SEQUENCE_MISMATCH":
      return "✗ the table moved on before your move arrived: look again and retry";
    case "NOT_YOUR_SEAT":
      return `✗ not your seat: ${message}`;
    case "INSUFFICIENT_FUNDS":
      return `✗ not enough chips: ${failure.metadata["available"] ?? "?"} available, ${failure.metadata["required"] ?? "?"} needed`;
    case "QUOTA_EXCEEDED":
      return `✗ too many requests for now (${failure.metadata["quota"] ?? "quota"}): wait a moment and retry`;
    case "TOKEN_EXPIRED":
    case "UNAUTHENTICATED":
      return "✗ the server did not accept your sign-in: reload the page, or choose your name again";
    default:
      break;
  }
  if (failure.code === Code.Unavailable) {
    return "✗ the server cannot be reached just now: retry in a moment";
  }
  return `✗ ${failure.reason || Code[failure.code]}: ${message}`;
}
