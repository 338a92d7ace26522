// The cluster page (#/cluster), from `GET /v1/shards`: the nodes and the
// shards each serves (one host: this one, serving every shard), in a
// cluster the answering node's leases and takeovers (its
// `assignd_cluster_*` metrics), then its shards with their groups and
// timers.

import { api, shards } from "./api.js";
import { el, poll, replace } from "./dom.js";
import { parseMetrics } from "./modules.js";
import { sortableTable } from "./table.js";

/** The answering node's cluster figures: [label, metric] by `/metrics`. */
const NODE_FIGURES = [
  ["Lease renewals", "assignd_cluster_lease_renewals_total"],
  ["Lease renewal failures", "assignd_cluster_lease_renewal_failures_total"],
  ["Step-downs (lease lost)", "assignd_cluster_step_downs_total"],
  ["Shards taken over", "assignd_cluster_shards_taken_total"],
  ["Shards handed over", "assignd_cluster_shards_handed_over_total"],
  ["Requests forwarded", "assignd_cluster_forwards_total"],
  ["Heartbeats redirected", "assignd_cluster_redirects_total"],
  ["etcd available", "assignd_cluster_etcd_available"],
];

function nodeFigures(metrics) {
  if (typeof metrics !== "string") return el("p", { text: `Unknown: /metrics answered ${metrics.message}` });
  const totals = new Map();
  for (const { name, value } of parseMetrics(metrics)) totals.set(name, (totals.get(name) ?? 0) + value);
  return el(
    "dl",
    { id: "node-figures", class: "summary" },
    NODE_FIGURES.map(([label, name]) => [el("dt", { text: label }), el("dd", { text: totals.has(name) ? String(totals.get(name)) : "—" })]),
  );
}

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
  const figures = el("section", { class: "section", "aria-labelledby": "figures-title", hidden: true });
  main.append(
    el("h1", { text: "Cluster" }),
    summary,
    el("section", { class: "section", "aria-labelledby": "nodes-title" }, el("h2", { id: "nodes-title", text: "Nodes" }), nodes),
    figures,
    el("section", { class: "section", "aria-labelledby": "shards-title" }, el("h2", { id: "shards-title", text: "Shards this node serves" }), shardTable),
  );
  let list = null;
  let metrics = null;
  const draw = () => {
    figures.hidden = !list.nodes?.length;
    if (!figures.hidden) {
      replace(figures, el("h2", { id: "figures-title", text: `Leases and takeovers of ${list.node}` }), nodeFigures(metrics));
    }
    const served = list.shards.filter((s) => s.served);
    summary.textContent = list.nodes?.length
      ? `A cluster of ${list.nodes.length} nodes over ${list.shard_count} shards; this page was answered by ${list.node}.`
      : `One host serving ${served.length} of ${list.shard_count} shards.`;
    replace(nodes, sortableTable({ id: "nodes-table", caption: "Nodes", columns: nodeColumns, rows: nodesOf(list), state: nodeSort, onSort: draw }));
    replace(shardTable, sortableTable({ id: "shards-table", caption: "Shards", columns: shardColumns, rows: served, state: shardSort, onSort: draw }));
  };
  return poll(async () => {
    list = await shards();
    metrics = list.nodes?.length ? await api("/metrics").catch((e) => e) : null;
    draw();
  }, REFRESH_MS);
}
