// The rollouts pages: every rollout (#/rollouts, `GET /v1/rollouts`) with
// its phase, step and groups by state, and one rollout (#/rollouts/ID,
// `GET /v1/rollouts/ID`): its steps, the groups found unhealthy with the
// rule that fired and why, the groups it could not put back, and its last
// decisions; an admin can pause, resume or abort it with a reason (the
// next read shows what it did).

import { api, session } from "./api.js";
import { el, poll, replace, showError } from "./dom.js";
import { sortableTable } from "./table.js";

const REFRESH_MS = 2000;

/** A phase as text: "step 2 of 4", "rolled back: …". */
function phaseText(phase, step, steps, paused) {
  const name = typeof phase === "string" ? phase : phase.phase;
  let text = name.replaceAll("_", " ");
  if (name === "step") text = `step ${step} of ${steps}`;
  if (typeof phase === "object" && phase.reason) text += `: ${phase.reason}`;
  if (paused) text += ` (paused: ${paused})`;
  return text;
}

function counts(groups) {
  const parts = ["pending", "shadowed", "bound", "restored", "unhealthy", "failed"]
    .filter((k) => groups[k] > 0)
    .map((k) => `${groups[k]} ${k}`);
  return parts.length === 0 ? "—" : parts.join(", ");
}

const columns = [
  { key: "id", label: "Rollout", value: (r) => r.id, cell: (r) => el("a", { href: `#/rollouts/${encodeURIComponent(r.id)}`, text: r.id }) },
  { key: "module", label: "Module", value: (r) => r.module },
  { key: "selector", label: "Groups", value: (r) => r.selector },
  { key: "phase", label: "Phase", value: (r) => phaseText(r.phase, r.step, r.steps, r.paused) },
  { key: "counts", label: "Groups by state", value: (r) => counts(r.groups) },
  { key: "started", label: "Started", value: (r) => r.started_ms, cell: (r) => new Date(r.started_ms).toISOString() },
];

export function renderRollouts(main) {
  const state = { key: "started", dir: "descending" };
  const holder = el("div", { class: "scroll" });
  main.append(el("h1", { text: "Rollouts" }), holder);
  let rollouts = [];
  const draw = () =>
    replace(holder, sortableTable({ id: "rollouts-table", caption: "Rollouts, running and recent", columns, rows: rollouts, state, onSort: draw, empty: "No rollout: start one with assignd rollout start." }));
  return poll(async () => {
    rollouts = (await api("/v1/rollouts")).rollouts;
    draw();
  }, REFRESH_MS);
}

/** One event as a line: its kind and the rest of its fields. */
function eventText(event) {
  const { seq: _seq, at_ms: _at, event: kind, ...rest } = event;
  const details = Object.entries(rest)
    .map(([k, v]) => `${k.replaceAll("_", " ")} ${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(", ");
  return `${kind.replaceAll("_", " ")}${details ? ` — ${details}` : ""}`;
}

function unhealthyTable(status) {
  if (status.unhealthy.length === 0 && status.failed.length === 0) return el("p", { text: "No group found unhealthy." });
  return el(
    "table",
    { id: "unhealthy-table", class: "table" },
    el("caption", { text: "Groups found unhealthy, or not put back" }),
    el("thead", {}, el("tr", {}, ["Group", "Rule", "Why"].map((h) => el("th", { scope: "col", text: h })))),
    el(
      "tbody",
      {},
      status.unhealthy.map((u) =>
        el("tr", {}, el("th", { scope: "row" }, el("a", { href: `#/groups/${encodeURIComponent(u.group)}`, text: u.group })), el("td", { text: JSON.stringify(u.rule) }), el("td", { text: u.detail })),
      ),
      status.failed.map((g) => el("tr", {}, el("th", { scope: "row", text: g }), el("td", { text: "—" }), el("td", { text: "could not be put back" }))),
    ),
  );
}

function actions(id) {
  if (session.readOnly) return null;
  const reason = el("input", { id: "rollout-reason", type: "text", placeholder: "why (kept with the rollout)" });
  const act = (verb) =>
    el("button", {
      type: "button",
      id: `rollout-${verb}`,
      text: verb[0].toUpperCase() + verb.slice(1),
      on: {
        click: async () => {
          try {
            const body = { reason: reason.value.trim() || `${verb} from the console` };
            await api(`/v1/rollouts/${encodeURIComponent(id)}/${verb}`, { method: "POST", body });
          } catch (e) {
            showError(e.message);
          }
        },
      },
    });
  return el("form", { class: "actions", on: { submit: (e) => e.preventDefault() } }, el("label", { for: "rollout-reason", text: "Reason" }), reason, act("pause"), act("resume"), act("abort"));
}

export function renderRollout(main, id) {
  const body = el("div");
  main.append(el("h1", { text: `Rollout ${id}` }), body);
  return poll(async () => {
    const s = await api(`/v1/rollouts/${encodeURIComponent(id)}`);
    const summary = el(
      "dl",
      { class: "facts" },
      [
        ["Module", s.module],
        ["Phase", phaseText(s.phase, s.step, s.steps, s.paused)],
        ["Steps (groups bound after each)", s.step_sizes.join(", ")],
        ["Groups by state", counts(s.groups)],
        ["Next decision", s.awaiting_samples ? "waiting for the groups' next samples" : s.next_decision_ms === null ? "—" : `at ${s.next_decision_ms} ms`],
      ].map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]),
    );
    const events = el("ol", { id: "rollout-events", class: "timeline" }, s.last_events.map((e) => el("li", { text: eventText(e) })));
    replace(body, summary, actions(id), el("h2", { text: "Health" }), unhealthyTable(s), el("h2", { text: "Decisions, latest last" }), events);
  }, REFRESH_MS);
}
