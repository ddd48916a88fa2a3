// The table, as a seat or as a spectator. It follows the watch stream and, after each update,
// reads the viewer's view again (as the terminal client does), so that what it shows is always
// the server's own picture and never holds a card the view does not. Moves are submitted at
// the sequence the player saw.

import { Code } from "@connectrpc/connect";
import { newRequestId, tables } from "../api";
import { h, patchContent } from "../dom";
import { explain, failureOf, type Failure } from "../errors";
import type { TableUpdate } from "../gen/masa/table/v1/event_pb";
import type { WatchTableResponse } from "../gen/masa/table/v1/table_pb";
import { type SeatView, Table_State, type TableView, TurnPhase } from "../gen/masa/table/v1/view_pb";
import { seatName, withNames } from "../names";
import { queueFor } from "../queueing";
import { go, href } from "../router";
import { clearError, clearPrompt, say, sayNext } from "../status";
import { pause } from "../timing";
import { renderMiddle, renderSeats, title, turnTimer } from "../table/board";
import { describe } from "../table/events";
import { followTable } from "../table/follow";
import { renderHand } from "../table/hand";
import { type ActionInit, hint, renderMoves } from "../table/moves";
import { chipsPaid, renderGameOver, renderHandResult } from "../table/results";
import { me, mySeat, myMove, onAutopilot, pruneChoices, queryAsksMe, selectedCards, sequence, type TableState } from "../table/state";

const ORDER_KEY = "masa.handOrder";
const LOG_LINES = 14;
// A move the server could not take now (a node restarting) is sent again, with the same
// request id so that it is applied at most once.
const SUBMIT_ATTEMPTS = 4;
const SUBMIT_BACKOFF_MS = 400;

export function tableScreen(root: HTMLElement, tableId: string, spectating: boolean, signal: AbortSignal): void {
  const state: TableState = {
    tableId,
    spectating,
    view: undefined,
    seat: undefined,
    selected: [],
    staged: [],
    targetMeld: undefined,
    order: localStorage.getItem(ORDER_KEY) === "rank" ? "rank" : "suit",
    focusKey: undefined,
    log: [],
    lastHand: undefined,
    ended: false,
    chips: "",
    busy: false,
  };
  let troubled = false;
  let refreshing = false;
  let refreshAgain = false;
  let chipsAsked = false;

  const named = (text: string): string => (state.view === undefined ? text : withNames(text, state.view, me(state)));

  function render(): void {
    const view = state.view;
    if (view === undefined) {
      patchContent(root, h("p", { class: "panel" }, `joining table ${tableId}…`));
      return;
    }
    const lost = patchContent(
      root,
      h(
        "section",
        {
          class: "table",
          "data-testid": "table",
          "data-table-id": tableId,
          "data-sequence": String(sequence(state)),
          "data-game": view.game.case ?? "",
          "data-phase": TurnPhase[view.turnPhase],
          "data-state": Table_State[view.table?.state ?? 0],
          "data-seat": me(state) ?? "",
          "data-my-move": myMove(state),
        },
        heading(view),
        renderSeats(state),
        renderMiddle(state, aimAt, (key) => {
          toggle(key);
          render();
        }),
        state.seat === undefined ? h("p", { class: "hint" }, spectating ? "you are watching" : "you have no seat at this table: you are watching it") : mine(),
        state.ended ? renderGameOver(view, me(state), state.chips || "counting the chips…", afterGame(view)) : null,
        state.lastHand === undefined ? null : renderHandResult(state.lastHand, view, me(state)),
        h(
          "section",
          { class: "log", "aria-labelledby": "log-title" },
          h("h3", { id: "log-title" }, "What happened"),
          h("ol", { "data-testid": "log" }, state.log.slice(-LOG_LINES).map((line) => h("li", {}, line))),
        ),
      ),
    );
    // The focused card left the hand (it was played): keep the focus in the hand.
    if (lost?.startsWith("card-")) {
      root.querySelector<HTMLElement>('[data-testid="hand"] [tabindex="0"]')?.focus();
    }
  }

  function heading(view: TableView): HTMLElement {
    const autopilot = onAutopilot(state) && !mySeat(state)?.forfeited;
    return h(
      "header",
      { class: "table-head" },
      h("h2", {}, title(view)),
      h("span", { class: "hint" }, `table ${tableId} · hand ${view.handNo}`),
      turnTimer(state),
      h(
        "div",
        { class: "row" },
        autopilot ? h("button", { type: "button", "data-testid": "take-control", onclick: takeControl }, "Take back control") : null,
        h("button", { type: "button", class: "quiet", "data-testid": "leave", onclick: leave }, state.seat === undefined || state.ended ? "Back to the lobbies" : "Leave the table"),
      ),
    );
  }

  function mine(): HTMLElement {
    return h(
      "section",
      { class: "my-seat", "aria-label": "your seat" },
      h("p", { class: "hint", "data-testid": "hint" }, hint(state)),
      // The hand before the moves: from the selected cards the moves are the next Tab.
      renderHand(state, {
        toggle: (key) => {
          toggle(key);
          state.focusKey = key;
          render();
        },
        focus: (key) => {
          state.focusKey = key;
        },
        resort: () => {
          state.order = state.order === "suit" ? "rank" : "suit";
          localStorage.setItem(ORDER_KEY, state.order);
          render();
        },
      }),
      renderMoves(state, { submit, stage, unstage }),
    );
  }

  function afterGame(view: TableView): HTMLElement {
    const lobbyId = view.table?.config?.lobbyId;
    return h(
      "div",
      { class: "row" },
      h("a", { href: href({ screen: "home" }), "data-testid": "back-home" }, "Back to the lobbies"),
      state.seat !== undefined && lobbyId
        ? h("button", { type: "button", "data-testid": "play-again", onclick: () => void queueFor(lobbyId) }, "Play again")
        : null,
    );
  }

  function aimAt(meldId: number): void {
    state.targetMeld = state.targetMeld === meldId ? undefined : meldId;
    render();
  }

  function toggle(key: string): void {
    state.selected = state.selected.includes(key) ? state.selected.filter((other) => other !== key) : [...state.selected, key];
  }

  function stage(): void {
    const meld = selectedCards(state);
    if (meld.length) {
      state.staged = [...state.staged, meld];
      state.selected = [];
      render();
    }
  }

  function unstage(index: number): void {
    state.staged = state.staged.filter((_, at) => at !== index);
    render();
  }

  /** Take a newer view from the server; an older one (a slow answer) is dropped. */
  function adopt(seatView: SeatView | undefined, tableView: TableView | undefined): void {
    if (tableView === undefined || (tableView.table?.sequence ?? 0n) < sequence(state)) {
      return;
    }
    const wasMine = myMove(state);
    state.view = tableView;
    state.seat = spectating ? undefined : seatView;
    pruneChoices(state);
    const lifecycle = tableView.table?.state;
    if (lifecycle === Table_State.FINISHED || lifecycle === Table_State.VOIDED) {
      ended();
    }
    if (!wasMine && myMove(state)) {
      say(promptFor(), "prompt");
    } else if (wasMine && !myMove(state)) {
      clearPrompt();
    }
    render();
  }

  function promptFor(): string {
    const view = state.view!;
    if (queryAsksMe(state) && view.game.case === "fiftyone") {
      return `${seatName(view, view.game.value.query?.takerSeat ?? -1, me(state))} wants the discard: give it or refuse, before the time runs out (F-80)`;
    }
    return view.turnPhase === TurnPhase.GIVE ? "kopile: give a card (E-9)" : "your turn";
  }

  function ended(): void {
    state.ended = true;
    if (chipsAsked || state.view === undefined) {
      return;
    }
    chipsAsked = true;
    chipsPaid(state.view, me(state), signal)
      .then((text) => {
        state.chips = text;
        render();
      })
      .catch((error: unknown) => {
        if (!signal.aborted) {
          state.chips = `the chips could not be read: ${explain(failureOf(error))}`;
          render();
        }
      });
  }

  function absorb(update: TableUpdate): void {
    const view = state.view;
    for (const event of update.events) {
      const line = view === undefined ? "" : describe(event, view, me(state));
      if (line) {
        state.log.push(line);
      }
      switch (event.kind.case) {
        case "handDealt":
          state.lastHand = undefined;
          break;
        case "handFinished":
          state.lastHand = event.kind.value;
          break;
        case "gameFinished":
        case "gameAbandoned":
          ended();
          break;
        default:
          break;
      }
    }
    render();
    void refresh();
  }

  /** Read the view again; calls that come while one is out are folded into one more. */
  async function refresh(): Promise<void> {
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = true;
    try {
      do {
        refreshAgain = false;
        const answer = await tables.getTable({ tableId }, { signal });
        if (answer.view.case === "seatView") {
          adopt(answer.view.value, answer.view.value.table);
        } else if (answer.view.case === "spectatorView") {
          adopt(undefined, answer.view.value);
        }
      } while (refreshAgain && !signal.aborted);
    } catch (error) {
      if (!signal.aborted) {
        say(explain(failureOf(error), named), "error");
      }
    } finally {
      refreshing = false;
    }
  }

  function onMessage(message: WatchTableResponse): void {
    if (troubled) {
      troubled = false;
      say("reconnected", "ok");
    }
    switch (message.payload.case) {
      case "seatView":
        adopt(message.payload.value, message.payload.value.table);
        break;
      case "spectatorView":
        adopt(undefined, message.payload.value);
        break;
      case "update":
        absorb(message.payload.value);
        break;
      default:
        break;
    }
  }

  async function submit(action: ActionInit): Promise<void> {
    const requestId = newRequestId();
    const expectedSequence = sequence(state);
    state.busy = true;
    render();
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await tables.submitAction({ requestId, tableId, expectedSequence, action }, { signal });
          state.selected = [];
          state.staged = [];
          state.targetMeld = undefined;
          clearError();
          return;
        } catch (error) {
          const failure = failureOf(error);
          if (failure.code !== Code.Unavailable || attempt >= SUBMIT_ATTEMPTS || signal.aborted) {
            refused(failure);
            return;
          }
          await pause(SUBMIT_BACKOFF_MS * attempt, signal);
        }
      }
    } finally {
      state.busy = false;
      render();
      // The move's button was disabled while it was sent, which drops the keyboard focus:
      // give it back to the hand, whatever the answer, so that the next move is a Tab away.
      if (document.activeElement === null || document.activeElement === document.body) {
        root.querySelector<HTMLElement>('[data-testid="hand"] [tabindex="0"]')?.focus();
      }
    }
  }

  function refused(failure: Failure): void {
    if (signal.aborted) {
      return;
    }
    say(explain(failure, named), "error");
    if (failure.code === Code.Aborted || failure.code === Code.FailedPrecondition) {
      void refresh();
    }
  }

  function takeControl(): void {
    tables
      .resumeControl({ requestId: newRequestId(), tableId }, { signal })
      .then(({ seatView }) => {
        say("you have your seat back", "ok");
        adopt(seatView, seatView?.table);
      })
      .catch((error: unknown) => say(explain(failureOf(error), named), "error"));
  }

  function leave(): void {
    if (state.seat === undefined || state.ended) {
      go({ screen: "home" });
      return;
    }
    tables
      .leaveTable({ requestId: newRequestId(), tableId })
      .then(({ table }) => {
        const over = table?.state !== Table_State.PLAYING;
        sayNext(
          over
            ? `you left table ${tableId}, which has ended`
            : `you left table ${tableId}: your seat is kept for a while (P-12); come back to it from here before it forfeits`,
          "info",
        );
        go({ screen: "home" });
      })
      .catch((error: unknown) => say(explain(failureOf(error), named), "error"));
  }

  render();
  followTable(
    tableId,
    spectating,
    {
      message: onMessage,
      trouble: (failure, attempt) => {
        troubled = true;
        say(`the connection to the table dropped (${failure.reason || Code[failure.code]}): reconnecting, attempt ${attempt}…`, "error");
      },
      finished: () => state.ended,
    },
    signal,
  ).catch((error: unknown) => {
    const failure = failureOf(error);
    say(
      failure.code === Code.NotFound ? `✗ there is no table ${tableId}` : explain(failure, named),
      "error",
    );
    if (state.view === undefined) {
      patchContent(root, h("p", { class: "panel" }, h("a", { href: href({ screen: "home" }), "data-testid": "back-home" }, "Back to the lobbies")));
    }
  });
}
