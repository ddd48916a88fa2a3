// A few lines of DOM building and patching, in place of a UI framework that would weigh more
// than the whole client.

export type Child = Node | string | number | null | undefined | false;
type Handler = (event: Event) => void;
export type Props = Record<string, string | number | boolean | Handler | undefined>;

/** An element with attributes, listeners (props named `on<event>`) and children. A prop
 * whose value is false or undefined is left out, true sets an empty attribute, but for
 * data-* and aria-* props, which always say "true" or "false". */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (typeof value === "function") {
      // A handler property rather than a listener: patching copies it to the kept element.
      (element as unknown as Record<string, unknown>)[name] = value;
    } else if (typeof value === "boolean" && (name.startsWith("data-") || name.startsWith("aria-"))) {
      // data-* and aria-* say "true" or "false"; other boolean attributes are there or not.
      element.setAttribute(name, String(value));
    } else if (value === true) {
      element.setAttribute(name, "");
    } else if (value !== false && value !== undefined) {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

function append(parent: Node, children: (Child | Child[])[]): void {
  for (const child of children) {
    if (Array.isArray(child)) {
      append(parent, child);
    } else if (child instanceof Node) {
      parent.appendChild(child);
    } else if (child !== null && child !== undefined && child !== false) {
      parent.appendChild(document.createTextNode(String(child)));
    }
  }
}

// The handler properties h() sets, which patching carries over.
const HANDLERS = ["onclick", "onkeydown", "onfocus", "onchange"] as const;

/** Make the content of `parent` that of `children`, keeping every element that is still there
 * (matched by data-key, else data-testid, else tag and place) rather than replacing it. The
 * table is drawn again on every move: kept elements keep the keyboard focus and stay the same
 * elements for a browser test that holds them. When the focused element is gone, returns its
 * test id, for the caller to focus a neighbour. */
export function patchContent(parent: HTMLElement, ...children: (Child | Child[])[]): string | undefined {
  const focused = document.activeElement;
  const testId = focused instanceof HTMLElement && parent.contains(focused) ? focused.dataset["testid"] : undefined;
  const fresh = document.createElement(parent.tagName);
  append(fresh, children);
  patchChildren(parent, fresh);
  return testId !== undefined && !parent.contains(focused) ? testId : undefined;
}

function keyOf(node: Node): string | undefined {
  return node instanceof HTMLElement ? (node.dataset["key"] ?? node.dataset["testid"]) : undefined;
}

function sameKind(old: Node, fresh: Node): boolean {
  return old.nodeType === fresh.nodeType && old.nodeName === fresh.nodeName && keyOf(old) === keyOf(fresh);
}

function patchChildren(old: Node, fresh: Node): void {
  const keyed = new Map<string, Node>();
  for (const child of old.childNodes) {
    const key = keyOf(child);
    if (key !== undefined) {
      keyed.set(key, child);
    }
  }
  const unkeyed = Array.from(old.childNodes).filter((child) => keyOf(child) === undefined);
  const wanted = Array.from(fresh.childNodes).map((child) => {
    const key = keyOf(child);
    const candidate = key === undefined ? unkeyed.shift() : keyed.get(key);
    if (candidate !== undefined && sameKind(candidate, child)) {
      keyed.delete(key ?? "");
      patchNode(candidate, child);
      return candidate;
    }
    return child;
  });
  // Removed first, so that the kept ones rarely move: moving the focused element blurs it.
  const keep = new Set(wanted);
  for (const child of Array.from(old.childNodes)) {
    if (!keep.has(child)) {
      child.remove();
    }
  }
  wanted.forEach((child, index) => {
    if (old.childNodes[index] !== child) {
      old.insertBefore(child, old.childNodes[index] ?? null);
    }
  });
}

function patchNode(old: Node, fresh: Node): void {
  if (!(old instanceof HTMLElement && fresh instanceof HTMLElement)) {
    if (old.nodeValue !== fresh.nodeValue) {
      old.nodeValue = fresh.nodeValue;
    }
    return;
  }
  for (const { name } of Array.from(old.attributes)) {
    if (!fresh.hasAttribute(name)) {
      old.removeAttribute(name);
    }
  }
  for (const { name, value } of Array.from(fresh.attributes)) {
    if (old.getAttribute(name) !== value) {
      old.setAttribute(name, value);
    }
  }
  // Properties the attributes do not drive once the element exists.
  if (old instanceof HTMLButtonElement && fresh instanceof HTMLButtonElement) {
    old.disabled = fresh.disabled;
  }
  if (old instanceof HTMLOptionElement && fresh instanceof HTMLOptionElement && !old.parentElement?.matches(":focus")) {
    old.selected = fresh.selected;
  }
  const target = old as unknown as Record<string, unknown>;
  const source = fresh as unknown as Record<string, unknown>;
  for (const handler of HANDLERS) {
    target[handler] = source[handler];
  }
  patchChildren(old, fresh);
}
