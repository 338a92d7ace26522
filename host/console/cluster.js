// The cluster page (#/cluster), from `GET /v1/shards`: the nodes and the
// shards each serves (one host: this one, serving every shard), then this
// node's shards with their groups and timers.

import { shards } from "./api.js";
import { el, poll, replace } from "./dom.js";
import { sortableTable } from "./table.js";

const REFRESH_MS = 3000;

/** Shard ids as ranges: [0,1,2,5] → "0–2, 5". */
export function shardRanges(ids) {
  const sorted = [...ids].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}–${sorted[j]}`);
    i = j;
  }
  return parts.join(", ") || "none";
}

function nodesOf(list) {
  if (list.nodes?.length) {
    return list.nodes.map((n) => ({ ...n, me: n.name === list.node }));
  }
  return [{ name: list.node ?? "this host", url: location.origin, shards: list.served, me: true }];
}

const nodeColumns = [
  { key: "name", label: "Node", value: (n) => n.name, cell: (n) => (n.me ? `${n.name} (answering)` : n.name) },
  { key: "url", label: "URL", value: (n) => n.url },
  { key: "count", label: "Shards", numeric: true, value: (n) => n.shards.length },
  { key: "shards", label: "Shard ids", value: (n) => shardRanges(n.shards) },
];

const shardColumns = [
  { key: "shard", label: "Shard", numeric: true, value: (s) => s.shard },
  { key: "served", label: "Served", value: (s) => (s.served ? "yes" : "no") },
  { key: "groups", label: "Groups", numeric: true, value: (s) => s.groups },
  { key: "next", label: "Next timer (ms)", numeric: true, value: (s) => s.next_deadline_in_ms ?? "—" },
  {
    key: "timers",
    label: "Timers",
    value: (s) =>
      Object.entries(s.timers)
        .map(([kind, n]) => `${kind} ${n}`)
        .join(", ") || "—",
  },
];

export function renderCluster(main) {
  const nodeSort = { key: "name", dir: "ascending" };
  const shardSort = { key: "groups", dir: "descending" };
  const summary = el("p", { id: "cluster-summary" });
  const nodes = el("div", { class: "scroll" });
  const shardTable = el("div", { class: "scroll" });
  main.append(
    el("h1", { text: "Cluster" }),
    summary,
    el("section", { class: "section", "aria-labelledby": "nodes-title" }, el("h2", { id: "nodes-title", text: "Nodes" }), nodes),
    el("section", { class: "section", "aria-labelledby": "shards-title" }, el("h2", { id: "shards-title", text: "Shards this node serves" }), shardTable),
  );
  let list = null;
  const draw = () => {
    const served = list.shards.filter((s) => s.served);
    summary.textContent = list.nodes?.length
      ? `A cluster of ${list.nodes.length} nodes over ${list.shard_count} shards; this page was answered by ${list.node}.`
      : `One host serving ${served.length} of ${list.shard_count} shards.`;
    replace(nodes, sortableTable({ id: "nodes-table", caption: "Nodes", columns: nodeColumns, rows: nodesOf(list), state: nodeSort, onSort: draw }));
    replace(shardTable, sortableTable({ id: "shards-table", caption: "Shards", columns: shardColumns, rows: served, state: shardSort, onSort: draw }));
  };
  return poll(async () => {
    list = await shards();
    draw();
  }, REFRESH_MS);
}
