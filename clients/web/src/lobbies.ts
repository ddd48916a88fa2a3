// Lobbies and tickets in words: what a lobby plays, how busy it is, and what a ticket waits for
// (masa_client/seating.py says the same in the terminal).

import type { Duration } from "@bufbuild/protobuf/wkt";
import { BotLevel, GameKind, Mode, Preset } from "./gen/masa/common/v1/game_pb";
import { type Lobby, type SeatWaits, Ticket_State } from "./gen/masa/matchmaking/v1/matchmaking_pb";
import { count, span } from "./names";

const PRESETS: Readonly<Record<number, string>> = {
  [Preset.CLASSIC]: "classic",
  [Preset.SALON]: "salon",
  [Preset.REMI]: "remi",
  [Preset.UNSPECIFIED]: "salon",
};
const MODES: Readonly<Record<number, string>> = {
  [Mode.SINGLES]: "singles",
  [Mode.UNSPECIFIED]: "singles",
  [Mode.TEAMS]: "teams",
  [Mode.TRAINING]: "training",
};
export const LEVELS: Readonly<Record<number, string>> = {
  [BotLevel.UNSPECIFIED]: "normal",
  [BotLevel.EASY]: "easy",
  [BotLevel.NORMAL]: "normal",
  [BotLevel.HARD]: "hard",
};
const TICKET_STATES: Readonly<Record<number, string>> = {
  [Ticket_State.SEARCHING]: "searching",
  [Ticket_State.PLACING]: "a table is being made",
  [Ticket_State.MATCHED]: "seated",
  [Ticket_State.CANCELLED]: "cancelled",
  [Ticket_State.EXPIRED]: "expired",
  [Ticket_State.FAILED]: "failed",
};

export function seconds(duration: Duration | undefined): number {
  return duration === undefined ? 0 : Number(duration.seconds) + duration.nanos / 1e9;
}

/** "51 salon", "Elevator", or a plugin game's registered name. */
export function gameTitle(game: GameKind, preset: Preset, gameName = ""): string {
  if (game === GameKind.FIFTYONE) {
    return `51 ${PRESETS[preset] ?? ""}`.trim();
  }
  if (game === GameKind.ELEVATOR) {
    return "Elevator";
  }
  return gameName || "a game this client cannot show";
}

/** "51 salon, training, 4 seats, no chips, bots easy/normal/hard, autopilot hard, …". */
export function describeLobby(lobby: Lobby): string {
  const seats = lobby.minSeats === lobby.maxSeats ? `${lobby.maxSeats}` : `${lobby.minSeats}-${lobby.maxSeats}`;
  const parts = [
    gameTitle(lobby.game, lobby.preset, lobby.gameName),
    MODES[lobby.mode] ?? "?",
    `${seats} seats`,
    lobby.stake > 0n ? `${lobby.stake} chips` : "no chips",
  ];
  if (lobby.rakeBasisPoints) {
    parts.push(`rake ${lobby.rakeBasisPoints / 100}%`);
  }
  if (lobby.placeShares.length > 1) {
    parts.push(`pays ${lobby.placeShares.map((share) => `${share / 100}%`).join(" / ")}`);
  }
  if (lobby.mode === Mode.TRAINING && lobby.botLevels.length) {
    parts.push(`bots ${lobby.botLevels.map((level) => LEVELS[level] ?? "?").join("/")}`);
  }
  if (lobby.autopilotLevel === BotLevel.HARD) {
    parts.push("autopilot hard");
  }
  const turn = seconds(lobby.turnTime);
  if (turn) {
    parts.push(`${span(turn)} a turn`);
  }
  return parts.join(", ");
}

/** "median 12 s (9 in 10 within 40 s)"; "" before anyone was seated there. */
export function recentWaits(waits: SeatWaits | undefined): string {
  if (waits === undefined || !waits.placements) {
    return "";
  }
  return `${span(seconds(waits.median))} (9 in 10 within ${span(seconds(waits.p90))})`;
}

/** How busy the lobby is: "2 waiting, 1 playing, players waited 12 s (…), seats you now". */
export function lobbyActivity(lobby: Lobby): string {
  const parts = [`${lobby.queueLength} waiting`, `${lobby.tablesInPlay} playing`];
  const waited = recentWaits(lobby.recentWaits);
  if (waited) {
    parts.push(`players waited ${waited}`);
  }
  if (lobby.seatsNow) {
    parts.push("seats you now");
  }
  return parts.join(" · ");
}

export function ticketState(state: Ticket_State): string {
  return TICKET_STATES[state] ?? "unknown";
}

/** What a searching ticket waits for: the players its lobby still needs (bots never sit at a
 * chip table, P-13), and how long the lobby's last seated players waited. */
export function waitingLine(needed: number, waits: SeatWaits | undefined): string {
  const waited = recentWaits(waits);
  const lately = waited ? `; players seated here lately waited ${waited}` : "";
  if (needed) {
    return `waiting for ${count(needed, "more player")}: bots never sit at a chip table (P-13)${lately}`;
  }
  return `enough players are searching: a table is being matched${lately}`;
}
