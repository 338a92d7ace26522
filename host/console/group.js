// One group's page (#/groups/NAME), updated live (its view read every
// second): a summary, the members with their state, endpoint, lag and load,
// the assignment as a grid, the binding history and the rollback target, a
// timeline of rebalances, the assignor's failures, and the shadow's
// comparisons when the view has them. The admin token also
// gets the actions (drain a member, roll the assignor back).

import { ago, api, groupPath, session, shards } from "./api.js";
import { el, num, poll, replace, section, showError } from "./dom.js";
import { assignmentGrid, memberLabel, movingCount } from "./assignment.js";
import { shadowLabel } from "./groups.js";
import { sortableTable } from "./table.js";

const REFRESH_MS = 1000;
/** Reads of the view between two reads of the host's clock. */
const CLOCK_EVERY_READS = 30;

function summary(view) {
  const item = (term, value) => [el("dt", { text: term }), el("dd", {}, value)];
  return el(
    "dl",
    { class: "summary" },
    item("Phase", el("span", { class: `phase ${view.state}`, text: view.state })),
    item("Group epoch", String(view.group_epoch)),
    item("Target epoch", String(view.target_epoch)),
    item("Members", String(view.members.length)),
    item("Assignor", view.config.assignor),
    view.shadow && item("Shadow", shadowLabel(view.shadow)),
    item("Learners", String(view.learner_count)),
    item("Tasks moving", String(movingCount(view))),
    view.loads && item(`Load (${view.loads.unit})`, `${num(view.loads.total)} total, imbalance ${num(view.loads.imbalance)}`),
  );
}

function memberState(member) {
  const flags = [member.reconcile_state.replaceAll("_", " ")];
  if (member.away) flags.push("away");
  if (member.draining) flags.push("draining");
  return flags.join(", ");
}

function lagOf(member) {
  if (member.lags.length === 0) return null;
  return member.lags.reduce((sum, row) => sum + row[2], 0);
}

function drainButton(name, member, refresh) {
  return el("button", {
    type: "button",
    class: "action",
    "data-key": `drain-${member.slot}`,
    "data-action": "drain",
    disabled: member.draining,
    "aria-label": `Drain ${memberLabel(member)}`,
    text: "Drain",
    on: {
      click: async () => {
        try {
          await api(`${groupPath(name)}/members/${encodeURIComponent(member.member_id)}/drain`, { method: "POST" });
          refresh();
        } catch (e) {
          showError(e.message);
        }
      },
    },
  });
}

function membersTable(view, state, redraw, refresh) {
  const columns = [
    { key: "member", label: "Member", value: memberLabel },
    { key: "state", label: "State", value: memberState },
    { key: "epoch", label: "Epoch", numeric: true, value: (m) => m.member_epoch },
    { key: "endpoint", label: "Endpoint", value: (m) => m.endpoint ?? "—" },
    { key: "lease", label: "Lease left", numeric: true, value: (m) => m.lease_left_ms ?? -1, cell: (m) => (m.lease_left_ms == null ? "—" : `${m.lease_left_ms} ms`) },
    { key: "active", label: "Active", numeric: true, value: (m) => m.active.length },
    { key: "target", label: "Target", numeric: true, value: (m) => m.target.active.length },
    { key: "learners", label: "Learners", numeric: true, value: (m) => m.target.learner.length },
    { key: "lag", label: "Lag", numeric: true, value: (m) => lagOf(m) ?? "—" },
    { key: "load", label: "Load / share", numeric: true, value: (m) => m.load?.ratio ?? "—", cell: (m) => (m.load ? `${num(m.load.load)} / ${num(m.load.share)}` : "—") },
  ];
  if (!session.readOnly) {
    columns.push({ key: "actions", label: "Actions", value: () => "", cell: (m) => drainButton(view.name, m, refresh) });
  }
  return sortableTable({ id: "members-table", caption: `Members of ${view.name}`, columns, rows: view.members, state, onSort: redraw, empty: "No member." });
}

function bindings(view, refresh) {
  const rows = [...view.bindings].reverse();
  const current = view.bindings.at(-1);
  const previous = view.bindings.at(-2);
  const table = el(
    "table",
    { id: "bindings-table", class: "table" },
    el("caption", { text: "Assignor bindings, newest first" }),
    el("thead", {}, el("tr", {}, ["#", "Module", "Params", "Epoch", "When", "Rollback of"].map((h) => el("th", { scope: "col", text: h })))),
    el(
      "tbody",
      {},
      rows.map((b) =>
        el(
          "tr",
          {},
          el("th", { scope: "row", text: String(b.seq) }),
          el("td", { text: b.module + (b === current ? " (current)" : "") }),
          el("td", { text: Object.entries(b.params ?? {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—" }),
          el("td", { text: String(b.epoch) }),
          el("td", { text: ago(b.at_ms) }),
          el("td", { text: b.rollback_to ?? "—" }),
        ),
      ),
    ),
  );
  const target = el("p", { id: "rollback-target", text: previous ? `A rollback returns to #${previous.seq}: ${previous.module}.` : "No earlier binding to roll back to." });
  const rollback =
    !session.readOnly && previous
      ? el("button", {
          type: "button",
          class: "action",
          "data-key": "rollback",
          "data-action": "rollback",
          text: `Roll back to ${previous.module}`,
          on: {
            click: async () => {
              try {
                await api(`${groupPath(view.name)}/assignor/rollback`, { method: "POST" });
                refresh();
              } catch (e) {
                showError(e.message);
              }
            },
          },
        })
      : null;
  return [el("div", { class: "scroll" }, table), target, rollback];
}

function timeline(view) {
  const entries = Array.isArray(view.rebalances) ? [...view.rebalances].reverse() : view.last_rebalance ? [view.last_rebalance] : [];
  if (entries.length === 0) return el("p", { text: "No rebalance since this host started." });
  return el(
    "ol",
    { id: "rebalances", class: "timeline", reversed: true },
    entries.map((r) =>
      el(
        "li",
        {},
        el("strong", { text: `epoch ${r.epoch}` }),
        ` · ${r.reason} · ${ago(r.at_ms)}`,
        r.moved !== undefined ? ` · ${r.moved} moved` : "",
        r.learners_started !== undefined ? ` · ${r.learners_started} learners started` : "",
        typeof r.settled_ms === "number" ? ` · settled in ${num((r.settled_ms - r.at_ms) / 1000, 1)} s` : "",
        r.settled_ms === null ? " · settling" : "",
      ),
    ),
  );
}

function failures(view) {
  const f = view.assignor_failures;
  if (!f) return el("p", { text: "The assignor has not failed since this host started." });
  return el(
    "dl",
    { class: "summary" },
    [
      ["Module", f.module],
      ["Last failure", `${f.code}: ${f.message}`],
      ["When", ago(f.at_ms)],
      ["In a row", String(f.consecutive)],
      ["In all", String(f.total)],
      ["Fallback", f.fallback ? `${f.fallback} (${f.fallback_answers} answers)` : "—"],
    ].map(([term, value]) => [el("dt", { text: term }), el("dd", { text: value })]),
  );
}

/** The shadow assignor's comparison with the bound one (when the view has
 * `shadow`): its binding, its totals, and the comparisons newest first. */
export function renderShadow(shadow) {
  const comparisons = [...(shadow.comparisons ?? [])].reverse();
  const side = (s) => {
    if (s.failure) return `failed: ${s.failure}`;
    const parts = [`${s.moved ?? "—"} moved`, `${s.learners_started ?? "—"} learners started`, `spread ${s.count_spread ?? "—"}`];
    if (s.load_imbalance != null) parts.push(`load ×${num(s.load_imbalance)}`);
    if (s.elapsed_ms != null) parts.push(`${num(s.elapsed_ms)} ms`);
    if (s.fuel != null) parts.push(`fuel ${s.fuel}`);
    return parts.join(", ");
  };
  const table = el(
    "table",
    { id: "shadow-table", class: "table" },
    el("caption", { text: "Comparisons, newest first" }),
    el("thead", {}, el("tr", {}, ["Epoch", "Reason", "When", "Live", "Shadow", "Tasks placed apart"].map((h) => el("th", { scope: "col", text: h })))),
    el(
      "tbody",
      {},
      comparisons.map((c) =>
        el(
          "tr",
          {},
          el("th", { scope: "row", text: String(c.epoch) }),
          el("td", { text: c.reason }),
          el("td", { text: ago(c.at_ms) }),
          el("td", { text: `${c.live.assignor}: ${side(c.live)}` }),
          el("td", { text: `${c.shadow.assignor}: ${side(c.shadow)}` }),
          el("td", { text: c.disagreeing_tasks ?? "—" }),
        ),
      ),
    ),
  );
  return section(
    "shadow",
    "Shadow assignor",
    el("p", { text: shadow.binding ? `${shadow.binding.assignor}, bound ${ago(shadow.binding.at_ms)}` : "Ended; its last comparisons:" }),
    shadow.totals ? fieldList(shadow.totals) : null,
    comparisons.length ? el("div", { class: "scroll" }, table) : null,
  );
}

function fieldList(value) {
  if (value === null || typeof value !== "object") return el("p", { text: String(value) });
  return el(
    "dl",
    { class: "summary" },
    Object.entries(value).map(([k, v]) => [el("dt", { text: k.replaceAll("_", " ") }), el("dd", { text: typeof v === "object" ? JSON.stringify(v) : String(v) })]),
  );
}

export function renderGroup(main, name) {
  const memberSort = { key: "member", dir: "ascending" };
  const heading = el("h1", { text: `Group ${name}` });
  const body = el("div", { id: "group-body" });
  main.append(el("p", { class: "crumbs" }, el("a", { href: "#/groups", text: "← Groups" })), heading, body);
  let last = null;
  let reads = 0;
  let view = null;
  let stop = null;
  const draw = () =>
    replace(
      body,
      section("overview", "Overview", summary(view)),
      section("members", "Members", el("div", { class: "scroll" }, membersTable(view, memberSort, draw, refresh))),
      section("assignment", "Assignment", assignmentGrid(view)),
      view.shadow ? renderShadow(view.shadow) : null,
      section("history", "Bindings", bindings(view, refresh)),
      section("timeline", "Rebalances", timeline(view)),
      section("failures", "Assignor failures", failures(view)),
    );
  const read = async () => {
    if (reads++ % CLOCK_EVERY_READS === 0) await shards();
    const text = JSON.stringify((view = await api(groupPath(name))));
    if (text !== last) {
      last = text;
      draw();
    }
  };
  function refresh() {
    stop?.();
    stop = poll(read, REFRESH_MS);
  }
  refresh();
  return () => stop?.();
}
