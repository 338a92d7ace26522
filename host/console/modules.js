// The modules page (#/modules): every assignor (`GET /v1/assignors`) with
// its version, language, size, the groups that use it (by the group list)
// and its calls, failures and mean call time (the `assignd_assignor_*`
// families of `/metrics`, by their `module` label).

import { api } from "./api.js";
import { bytes, el, num, poll, replace } from "./dom.js";
import { sortableTable } from "./table.js";

const REFRESH_MS = 5000;

/** The samples of `/metrics` text: [{name, labels, value}]. */
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key] = value.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** Per module label: calls, failures, call seconds' sum and count. */
function moduleFigures(samples) {
  const figures = new Map();
  const of = (module) => {
    if (!figures.has(module)) figures.set(module, { calls: 0, failures: 0, seconds: 0, timed: 0 });
    return figures.get(module);
  };
  for (const { name, labels, value } of samples) {
    if (labels.module === undefined) continue;
    const f = of(labels.module);
    if (name === "assignd_assignor_calls_total") f.calls += value;
    else if (name === "assignd_assignor_failures_total") f.failures += value;
    else if (name === "assignd_assignor_call_seconds_sum") f.seconds += value;
    else if (name === "assignd_assignor_call_seconds_count") f.timed += value;
  }
  return figures;
}

/** The references a binding may name this module by. */
function references(module) {
  const refs = [module.id, `${module.name}@${module.version}`];
  if (module.builtin) refs.push(module.name);
  return refs;
}

function language(module) {
  return module.info?.language ?? (module.builtin ? "Rust" : "—");
}

const columns = [
  { key: "name", label: "Module", value: (m) => m.name },
  { key: "version", label: "Version", value: (m) => m.version },
  { key: "language", label: "Language", value: language },
  { key: "size", label: "Size", numeric: true, value: (m) => m.size_bytes, cell: (m) => bytes(m.size_bytes) },
  {
    key: "groups",
    label: "Used by",
    value: (m) => m.groups.length,
    cell: (m) =>
      m.groups.length === 0
        ? "—"
        : el("ul", { class: "inline" }, m.groups.map((g) => el("li", {}, el("a", { href: `#/groups/${encodeURIComponent(g)}`, text: g })))),
  },
  { key: "calls", label: "Calls", numeric: true, value: (m) => m.figures.calls },
  { key: "failures", label: "Failures", numeric: true, value: (m) => m.figures.failures },
  {
    key: "call",
    label: "Mean call",
    numeric: true,
    value: (m) => (m.figures.timed > 0 ? (m.figures.seconds / m.figures.timed) * 1000 : null),
    cell: (m) => (m.figures.timed > 0 ? `${num((m.figures.seconds / m.figures.timed) * 1000)} ms` : "—"),
  },
];

export function renderModules(main) {
  const state = { key: "name", dir: "ascending" };
  const holder = el("div", { class: "scroll" });
  const note = el("p", { class: "note" });
  main.append(el("h1", { text: "Modules" }), holder, note);
  let modules = [];
  const draw = () => replace(holder, sortableTable({ id: "modules-table", caption: "Assignor modules", columns, rows: modules, state, onSort: draw }));
  return poll(async () => {
    const [list, groups, metrics] = await Promise.all([
      api("/v1/assignors"),
      api("/v1/groups"),
      api("/metrics").catch((e) => e),
    ]);
    const figures = typeof metrics === "string" ? moduleFigures(parseMetrics(metrics)) : new Map();
    note.textContent = typeof metrics === "string" ? "Calls and failures since this host started." : `Calls unknown: /metrics answered ${metrics.message}`;
    modules = list.assignors.map((module) => {
      const refs = references(module);
      const summed = { calls: 0, failures: 0, seconds: 0, timed: 0 };
      for (const ref of refs) {
        const f = figures.get(ref);
        if (f) for (const k of Object.keys(summed)) summed[k] += f[k];
      }
      return { ...module, figures: summed, groups: groups.groups.filter((g) => refs.includes(g.assignor)).map((g) => g.name) };
    });
    draw();
  }, REFRESH_MS);
}
