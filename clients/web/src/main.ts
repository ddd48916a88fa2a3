// The page: a header saying who plays, the message area, and one screen at a time, chosen by
// the URL's hash so that a reload comes back to it.

import "./style.css";
import { h, patchContent } from "./dom";
import { identity, signOut } from "./identity";
import { currentRoute, go } from "./router";
import { homeScreen } from "./screens/home";
import { nameScreen } from "./screens/name";
import { queueScreen } from "./screens/queue";
import { tableScreen } from "./screens/table";
import { newScreen } from "./status";
import { startTicker } from "./timing";

let leaving: AbortController | null = null;

function element(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (found === null) {
    throw new Error(`index.html lacks #${id}`);
  }
  return found;
}

function show(): void {
  // Streams and timers of the screen left stop with it.
  leaving?.abort();
  const leave = new AbortController();
  leaving = leave;
  const root = element("screen");
  newScreen();
  showWho();
  if (identity() === null) {
    nameScreen(root, show);
    return;
  }
  const route = currentRoute();
  switch (route.screen) {
    case "home":
      homeScreen(root, leave.signal);
      break;
    case "ticket":
      queueScreen(root, route.id, leave.signal);
      break;
    case "table":
    case "watch":
      tableScreen(root, route.id, route.screen === "watch", leave.signal);
      break;
  }
}

function showWho(): void {
  const who = identity();
  patchContent(
    element("who"),
    who === null
      ? null
      : [
          h("a", { href: "#/", "data-testid": "home" }, "Lobbies"),
          h("span", { "data-testid": "player-name" }, who.player),
          h(
            "button",
            {
              type: "button",
              class: "quiet",
              "data-testid": "sign-out",
              onclick: () => {
                signOut();
                go({ screen: "home" });
                show();
              },
            },
            "Change name",
          ),
        ],
  );
}

window.addEventListener("hashchange", show);
startTicker();
show();
