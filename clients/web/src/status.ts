// The page's one message area (data-testid "status"), which screen readers announce: refused
// moves with their rule, prompts that need an answer in time, connection trouble.

export type Tone = "info" | "error" | "ok" | "prompt";

function area(): HTMLElement {
  const element = document.querySelector<HTMLElement>('[data-testid="status"]');
  if (element === null) {
    throw new Error("index.html lacks the status area");
  }
  return element;
}

export function say(text: string, tone: Tone = "info"): void {
  const element = area();
  element.textContent = text;
  element.dataset["tone"] = tone;
}

/** Take back a prompt ("your turn") once it no longer holds; a refusal or a notice stays. */
export function clearPrompt(): void {
  if (area().dataset["tone"] === "prompt") {
    say("");
  }
}

/** Take back a refusal or a connection trouble once a later move went through. */
export function clearError(): void {
  if (area().dataset["tone"] === "error") {
    say("");
  }
}

let carried: { text: string; tone: Tone } | null = null;

/** Say `text` on the screen about to be shown (a refusal that sends the player elsewhere). */
export function sayNext(text: string, tone: Tone = "info"): void {
  carried = { text, tone };
}

/** A new screen starts with an empty message area, or with what the last one left for it. */
export function newScreen(): void {
  say(carried?.text ?? "", carried?.tone ?? "info");
  carried = null;
}
