// Players by name, never "seat 3", as the terminal client names them (masa_client/render.py).

import { BotLevel, SeatKind } from "./gen/masa/common/v1/game_pb";
import type { TableView } from "./gen/masa/table/v1/view_pb";

// Names for bot seats created without one, so that every player has a name.
const BOT_NAMES = ["Ayla", "Deniz", "Kerem", "Selin", "Emre", "Zeynep"] as const;
// The bot levels a name mentions; normal (and unspecified, which is normal) goes unsaid.
const LEVEL_NAMES: Readonly<Record<number, string>> = { [BotLevel.EASY]: "easy ", [BotLevel.HARD]: "hard " };

/** "Ayla [bot]", "Kerem [hard bot]", "alice (you)". */
export function seatName(table: TableView, seat: number, me?: number): string {
  const state = table.seats.find((candidate) => candidate.seat === seat);
  if (state === undefined) {
    return "a player";
  }
  let name = state.displayName || state.playerId || BOT_NAMES[seat % BOT_NAMES.length] || "a bot";
  if (state.kind === SeatKind.BOT && !name.toLowerCase().includes("bot")) {
    name += ` [${LEVEL_NAMES[state.botLevel] ?? ""}bot]`;
  }
  return seat === me ? `${name} (you)` : name;
}

/** A server message with its players named: "seat 2 must play" -> "Ayla [bot] must play". */
export function withNames(text: string, table: TableView, me?: number): string {
  return text.replace(/\bseat (\d+)/g, (_, seat: string) => seatName(table, Number(seat), me));
}

/** "1 card", "2 cards", "0 cards". */
export function count(value: number | bigint, noun: string): string {
  return `${value} ${noun}${value === 1 || value === 1n ? "" : "s"}`;
}

/** A span of seconds as a person says it: "12 s", "3 min". */
export function span(seconds: number): string {
  return seconds < 90 ? `${Math.round(seconds)} s` : `${Math.round(seconds / 60)} min`;
}
