// Building the page: elements from data (text is always set as text, never
// parsed as HTML: group, member and module names come from users), the
// error banner and the "live" indicator in the header.

/**
 * A new element: `attrs` sets attributes (`class`, `aria-*`, `hidden`,
 * ...), `on` listeners (`{click: fn}`), `text` its text; `children` are
 * nodes or strings (appended as text), null and false skipped.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "text") {
      node.textContent = String(value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces `node`'s children with `children`, keeping the focus on the
 * element of the same `data-key` if the focused one is replaced. */
export function replace(node, ...children) {
  const focused = document.activeElement;
  const key = node.contains(focused) ? focused?.dataset?.key : undefined;
  node.replaceChildren();
  append(node, children);
  if (key !== undefined) {
    node.querySelector(`[data-key="${CSS.escape(key)}"]`)?.focus();
  }
}

const banner = () => document.getElementById("banner");

/** Shows `message` in the error banner (an ARIA alert). */
export function showError(message) {
  const node = banner();
  node.textContent = message;
  node.hidden = false;
}

export function hideError() {
  const node = banner();
  node.hidden = true;
  node.textContent = "";
}

/** The header's indicator: "live" while the page's reads succeed. */
export function setLive(state) {
  const node = document.getElementById("live");
  node.hidden = state === null;
  if (state === null) return;
  node.dataset.state = state;
  document.getElementById("live-text").textContent = state;
}

/** A count of bytes as text. */
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A number with at most `digits` decimals, or "—". */
export function num(n, digits = 2) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  return Number.isInteger(n) ? String(n) : n.toFixed(digits);
}

/** A task `[topic, partition]` as text. */
export function taskName(task) {
  return `${task[0]}/${task[1]}`;
}

/** A section with a heading: `<section aria-labelledby><h2>`. */
export function section(id, title, ...children) {
  return el(
    "section",
    { id, class: "section", "aria-labelledby": `${id}-title` },
    el("h2", { id: `${id}-title`, text: title }),
    ...children,
  );
}

/** The performance mark set when a page first shows its data, so that a
 * page's load can be timed to it (tests/console/bench_console.py). */
export const RENDERED_MARK = "assignd:rendered";

/**
 * Calls `read` now and every `intervalMs` until the returned stop is
 * called; a failed read shows the banner and the indicator "offline", the
 * next success clears them. Reads never overlap. The first read that
 * succeeds sets the mark `RENDERED_MARK`.
 */
export function poll(read, intervalMs) {
  let stopped = false;
  let timer = null;
  let rendered = false;
  const round = async () => {
    if (stopped) return;
    try {
      await read();
      if (stopped) return;
      if (!rendered) {
        rendered = true;
        performance.mark(RENDERED_MARK);
      }
      hideError();
      setLive("live");
    } catch (e) {
      if (stopped) return;
      showError(e.message);
      setLive("offline");
    }
    if (!stopped) timer = setTimeout(round, intervalMs);
  };
  round();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
