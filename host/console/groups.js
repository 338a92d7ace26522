// The groups page (#/groups): every group with its phase, members, epoch,
// assignor (and shadow), rebalances in the last hour, tasks moving and
// assignor failures; a text filter and sortable columns. The list comes
// from `GET /v1/groups`; the rest from each group's view.

import { api, groupPath, hostNow, shards } from "./api.js";
import { el, poll, replace } from "./dom.js";
import { movingCount } from "./assignment.js";
import { sortableTable } from "./table.js";

/** Groups whose views the page reads (the list shows every group). */
const GROUP_VIEWS_MAX = 200;
/** Views read at once. */
const READS_AT_ONCE = 6;
const REFRESH_MS = 2000;
const HOUR_MS = 3600 * 1000;

/** A shadow binding as one line, whatever its shape. */
export function shadowLabel(shadow) {
  if (shadow === null || shadow === undefined) return null;
  if (typeof shadow === "string") return shadow;
  if (shadow.binding === null) return "— (ended)";
  return shadow.binding?.assignor ?? shadow.module ?? shadow.assignor ?? JSON.stringify(shadow);
}

/** Rebalances of the last hour by the view: its `rebalances` history when
 * it has one, else whether `last_rebalance` is within the hour. */
export function rebalancesLastHour(view) {
  const now = hostNow();
  if (!view || now === null) return null;
  const since = now - HOUR_MS;
  if (Array.isArray(view.rebalances)) return view.rebalances.filter((r) => r.at_ms >= since).length;
  return view.last_rebalance && view.last_rebalance.at_ms >= since ? 1 : 0;
}

async function readViews(names) {
  const views = new Map();
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++];
      try {
        views.set(name, await api(groupPath(name)));
      } catch (e) {
        // A group deleted or moving between nodes meanwhile: its row
        // keeps the list's figures.
        if (e.status !== 404 && e.status !== 503) throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: READS_AT_ONCE }, worker));
  return views;
}

const columns = (withShadow) =>
  [
    {
      key: "name",
      label: "Group",
      value: (g) => g.name,
      cell: (g) => el("a", { href: `#/groups/${encodeURIComponent(g.name)}`, "data-key": `group-${g.name}`, text: g.name }),
    },
    { key: "phase", label: "Phase", value: (g) => g.state, cell: (g) => el("span", { class: `phase ${g.state}`, text: g.state }) },
    { key: "members", label: "Members", numeric: true, value: (g) => g.members },
    { key: "epoch", label: "Epoch", numeric: true, value: (g) => g.group_epoch },
    { key: "assignor", label: "Assignor", value: (g) => g.assignor },
    withShadow && { key: "shadow", label: "Shadow", value: (g) => shadowLabel(g.view?.shadow) ?? "—" },
    { key: "rebalances", label: "Rebalances (1 h)", numeric: true, value: (g) => rebalancesLastHour(g.view) ?? "—" },
    { key: "moving", label: "Tasks moving", numeric: true, value: (g) => (g.view ? movingCount(g.view) : "—") },
    { key: "failures", label: "Assignor failures", numeric: true, value: (g) => (g.view ? (g.view.assignor_failures?.total ?? 0) : "—") },
  ].filter(Boolean);

export function renderGroups(main) {
  const state = { key: "name", dir: "ascending" };
  let groups = [];
  const input = el("input", { id: "group-filter", type: "search", autocomplete: "off", "aria-describedby": "group-count" });
  const count = el("p", { id: "group-count", class: "count" });
  const holder = el("div", { class: "scroll" });
  const draw = () => {
    const needle = input.value.trim().toLowerCase();
    const shown = groups.filter((g) => g.name.toLowerCase().includes(needle) || (g.assignor ?? "").toLowerCase().includes(needle));
    count.textContent = `${shown.length} of ${groups.length} groups`;
    const withShadow = groups.some((g) => g.view?.shadow);
    replace(
      holder,
      sortableTable({ id: "groups-table", caption: "Groups", columns: columns(withShadow), rows: shown, state, onSort: draw, empty: "No group matches." }),
    );
  };
  input.addEventListener("input", draw);
  main.append(
    el("h1", { text: "Groups" }),
    el("div", { class: "filter" }, el("label", { for: "group-filter", text: "Filter by name or assignor" }), input, count),
    holder,
  );
  return poll(async () => {
    const [list] = await Promise.all([api("/v1/groups"), shards()]);
    const views = await readViews(list.groups.slice(0, GROUP_VIEWS_MAX).map((g) => g.name));
    groups = list.groups.map((g) => ({ ...g, view: views.get(g.name) }));
    draw();
  }, REFRESH_MS);
}
