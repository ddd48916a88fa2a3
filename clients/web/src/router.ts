// Where the player is, in the URL's hash, so that a reload comes back to the same screen: the
// queue of a ticket, a seat at a table, or a table watched as a spectator.

export type Route =
  | { readonly screen: "home" }
  | { readonly screen: "ticket"; readonly id: string }
  | { readonly screen: "table"; readonly id: string }
  | { readonly screen: "watch"; readonly id: string };

export function currentRoute(): Route {
  const [, screen, id] = window.location.hash.split("/");
  const decoded = id === undefined ? "" : decodePart(id);
  if (decoded && (screen === "ticket" || screen === "table" || screen === "watch")) {
    return { screen, id: decoded };
  }
  return { screen: "home" };
}

/** `part` decoded, or "" when it is no valid percent-encoding (a URL cut short or edited by
 * hand), which leads home instead of leaving the page on "loading…". */
function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return "";
  }
}

export function href(route: Route): string {
  return route.screen === "home" ? "#/" : `#/${route.screen}/${encodeURIComponent(route.id)}`;
}

/** Go to `route`; `replace` leaves no history entry for the screen left (a finished queue). */
export function go(route: Route, replace = false): void {
  const target = href(route);
  if (replace) {
    window.location.replace(target);
  } else {
    window.location.hash = target;
  }
}
