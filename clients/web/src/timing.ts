// Waiting and counting down: backoff pauses that end early when a screen is left, and the
// seconds left to a deadline, ticking in place without re-rendering the screen.

import { h } from "./dom";

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

const URGENT_SECONDS = 5;

/** A span that shows the whole seconds left until `deadlineMs` (epoch milliseconds), kept
 * current by the ticker below. */
export function countdown(deadlineMs: number, testId?: string): HTMLSpanElement {
  const element = h("span", { class: "countdown", "data-deadline": deadlineMs, "data-testid": testId });
  paint(element, Date.now());
  return element;
}

function paint(element: HTMLElement, now: number): void {
  const left = Math.max(0, Math.ceil((Number(element.dataset["deadline"]) - now) / 1000));
  const text = `${left} s`;
  if (element.textContent !== text) {
    element.textContent = text;
  }
  element.classList.toggle("urgent", left <= URGENT_SECONDS);
}

/** Start the one ticker of the page: every countdown on it is repainted a few times a second. */
export function startTicker(): void {
  setInterval(() => {
    const now = Date.now();
    document.querySelectorAll<HTMLElement>("[data-deadline]").forEach((element) => paint(element, now));
  }, 250);
}
