// A sortable table: each column header holds a button that sorts by it
// (again: the other way), and says how it is sorted with aria-sort. The
// first column is the row's header (th scope=row).

import { el } from "./dom.js";

/**
 * A table of `rows` by `columns` (`{key, label, value(row) -> sort key,
 * cell(row) -> node or text, numeric}`), sorted by `state.key` in
 * `state.dir` ("ascending" / "descending"), which a click changes before
 * calling `onSort`. `id` names the table (its buttons' data-key keep the
 * focus across refreshes).
 */
export function sortableTable({ id, caption, columns, rows, state, onSort, empty }) {
  const sortBy = columns.find((c) => c.key === state.key) ?? columns[0];
  const sign = state.dir === "descending" ? -1 : 1;
  const sorted = [...rows].sort((a, b) => sign * compare(sortBy.value(a), sortBy.value(b)));
  const head = el(
    "tr",
    {},
    columns.map((column) => {
      const active = column.key === sortBy.key;
      return el(
        "th",
        {
          scope: "col",
          class: column.numeric ? "numeric" : null,
          "aria-sort": active ? state.dir : "none",
        },
        el(
          "button",
          {
            type: "button",
            class: "sort",
            "data-key": `${id}-sort-${column.key}`,
            on: {
              click: () => {
                state.dir = active && state.dir === "ascending" ? "descending" : "ascending";
                state.key = column.key;
                onSort();
              },
            },
          },
          column.label,
          el("span", { class: "sort-mark", "aria-hidden": "true", text: active ? (sign > 0 ? " ▲" : " ▼") : "" }),
        ),
      );
    }),
  );
  const body = sorted.map((row) =>
    el(
      "tr",
      {},
      columns.map((column, i) =>
        el(
          i === 0 ? "th" : "td",
          { scope: i === 0 ? "row" : null, class: column.numeric ? "numeric" : null },
          column.cell ? column.cell(row) : String(column.value(row) ?? "—"),
        ),
      ),
    ),
  );
  if (sorted.length === 0) {
    body.push(el("tr", {}, el("td", { colspan: columns.length, class: "empty", text: empty ?? "None." })));
  }
  return el(
    "table",
    { id, class: "table" },
    el("caption", { text: caption }),
    el("thead", {}, head),
    el("tbody", {}, body),
  );
}

function compare(a, b) {
  const missing = (v) => v === null || v === undefined || v === "—";
  if (missing(a) || missing(b)) return missing(a) - missing(b);
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}
