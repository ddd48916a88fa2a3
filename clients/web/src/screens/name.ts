// The first screen: the player's name, for which the gateway mints a development token (as
// `masa token` does).

import { h } from "../dom";
import { NoDevTokens, PLAYER_NAME, signIn } from "../identity";
import { say } from "../status";

export function nameScreen(root: HTMLElement, signedIn: () => void): void {
  const input = h("input", {
    id: "player-name-input",
    "data-testid": "name-input",
    autocomplete: "username",
    maxlength: 64,
    required: true,
    // The browser anchors a pattern itself, and reads it with the v flag.
    pattern: PLAYER_NAME.source.slice(1, -1),
    autofocus: true,
  });
  const submit = h("button", { type: "submit", "data-testid": "name-submit" }, "Play");
  const form = h(
    "form",
    { class: "name-form" },
    h("label", { for: "player-name-input" }, "Your name"),
    input,
    submit,
    h("p", { class: "hint" }, "Letters, digits, and . _ - after the first; up to 64 characters."),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const player = input.value.trim();
    if (!PLAYER_NAME.test(player)) {
      say("✗ a name starts with a letter or digit, then letters, digits, '.', '_' or '-' (64 at most)", "error");
      input.focus();
      return;
    }
    submit.disabled = true;
    signIn(player)
      .then(signedIn)
      .catch((error: unknown) => {
        submit.disabled = false;
        const text = error instanceof NoDevTokens ? error.message : `the server could not be reached: ${String(error)}`;
        say(`✗ ${text}`, "error");
      });
  });
  root.replaceChildren(h("section", { class: "panel narrow", "aria-labelledby": "name-title" }, h("h2", { id: "name-title" }, "Who is playing?"), form));
  input.focus();
}
