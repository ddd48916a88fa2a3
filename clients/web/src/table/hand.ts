// The player's own hand: sorted, each card a toggle button. One card is in the Tab order at a
// time (a roving tabindex), arrow keys move between cards, Space or Enter selects.

import { cardCode, cardFace, cardKey, cardName } from "../cards";
import { h } from "../dom";
import { hand, type TableState } from "./state";

export interface HandHandlers {
  readonly toggle: (key: string) => void;
  readonly focus: (key: string) => void;
  readonly resort: () => void;
}

export function renderHand(state: TableState, handlers: HandHandlers): HTMLElement {
  const cards = hand(state);
  const seat = state.seat;
  const mustUse = new Set((seat?.mustUse ?? []).map(cardCode));
  const undiscardable = new Set((seat?.undiscardable ?? []).map(cardKey));
  const staged = new Set(state.staged.flat().map(cardKey));
  const keys = cards.map(cardKey);
  const focusKey = state.focusKey !== undefined && keys.includes(state.focusKey) ? state.focusKey : keys[0];
  // Test ids name the card by its code; a second copy of the same face (two decks) gets "-2".
  const seen = new Map<string, number>();
  const buttons = cards.map((card) => {
    const key = cardKey(card);
    const code = cardCode(card);
    const nth = (seen.get(code) ?? 0) + 1;
    seen.set(code, nth);
    const selected = state.selected.includes(key);
    const notes = [
      mustUse.has(code) ? "must be used this turn" : "",
      undiscardable.has(key) ? "may not be discarded" : "",
      staged.has(key) ? "in a meld you are putting together" : "",
    ].filter(Boolean);
    return h(
      "button",
      {
        type: "button",
        class: ["card", selected ? "selected" : "", mustUse.has(code) ? "must-use" : "", staged.has(key) ? "staged" : ""].join(" ").trim(),
        "data-testid": nth === 1 ? `card-${code}` : `card-${code}-${nth}`,
        "data-code": code,
        "data-key": key,
        "aria-pressed": selected ? "true" : "false",
        "aria-disabled": staged.has(key) ? "true" : undefined,
        "aria-label": cardName(card) + (notes.length ? `, ${notes.join(", ")}` : ""),
        tabindex: key === focusKey ? 0 : -1,
        onclick: () => {
          if (!staged.has(key)) {
            handlers.toggle(key);
          }
        },
        onfocus: () => handlers.focus(key),
      },
      cardFace(card),
    );
  });
  const group = h(
    "div",
    {
      class: "hand",
      role: "group",
      "aria-label": `your hand, ${cards.length} cards; arrow keys move, Space selects`,
      "data-testid": "hand",
      "data-count": cards.length,
      onkeydown: (event: Event) => moveFocus(event as KeyboardEvent),
    },
    buttons,
  );
  const sort = h(
    "button",
    { type: "button", class: "quiet", "data-testid": "sort-toggle", onclick: handlers.resort },
    state.order === "suit" ? "Sort by rank" : "Sort by suit",
  );
  return h("div", { class: "hand-area" }, h("div", { class: "row" }, h("h3", {}, "Your hand"), sort), group);
}

function moveFocus(event: KeyboardEvent): void {
  // The cards on the page now: patching may have kept other elements than the ones built.
  const buttons = Array.from((event.currentTarget as HTMLElement).querySelectorAll<HTMLButtonElement>("button.card"));
  const at = buttons.findIndex((button) => button === document.activeElement);
  if (at < 0) {
    return;
  }
  const to = {
    ArrowLeft: at - 1,
    ArrowUp: at - 1,
    ArrowRight: at + 1,
    ArrowDown: at + 1,
    Home: 0,
    End: buttons.length - 1,
  }[event.key];
  const target = to === undefined ? undefined : buttons[Math.max(0, Math.min(buttons.length - 1, to))];
  if (target !== undefined) {
    event.preventDefault();
    for (const button of buttons) {
      button.tabIndex = button === target ? 0 : -1;
    }
    target.focus();
  }
}
