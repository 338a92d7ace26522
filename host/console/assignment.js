// A group's assignment as a grid of tasks by member, derived from the group
// view: what each member holds (`active`, `revoking`) against its target
// (`target.active`, `learner`, `standby`). A task is *moving* to a member
// when its target gives it the task while another member still holds it
// (or is releasing it).

import { el, taskName } from "./dom.js";

/** Past this many tasks the grid shows the first ones and says so. */
export const GRID_TASKS_MAX = 512;

/** What a cell shows: its letter and what it means. */
export const CELL_KINDS = {
  active: { mark: "A", label: "active" },
  moving: { mark: "→", label: "moving in" },
  pending: { mark: "+", label: "granted, not yet held" },
  releasing: { mark: "←", label: "releasing" },
  learner: { mark: "L", label: "learner" },
  standby: { mark: "S", label: "standby" },
};

const key = (task) => `${task[0]}\u0000${task[1]}`;

/** Every task of the group: its topics' partitions, then any other task a
 * member holds or is given (a topic being removed). */
export function groupTasks(view) {
  const tasks = new Map();
  for (const topic of view.config?.topics ?? []) {
    for (let p = 0; p < topic.partitions; p++) tasks.set(key([topic.name, p]), [topic.name, p]);
  }
  for (const member of view.members) {
    for (const list of [member.active, member.revoking, member.target.active, member.target.learner, member.target.standby]) {
      for (const task of list) tasks.set(key(task), task);
    }
  }
  return [...tasks.values()].sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1));
}

/** Who holds each task now (active or releasing): task key → slots. */
function holders(view) {
  const held = new Map();
  for (const member of view.members) {
    for (const task of [...member.active, ...member.revoking]) {
      const k = key(task);
      if (!held.has(k)) held.set(k, new Set());
      held.get(k).add(member.slot);
    }
  }
  return held;
}

/** The kind of cell (a key of CELL_KINDS) for `member` and each task, as a
 * Map from task key; tasks the member has nothing to do with are absent. */
export function memberCells(view, member, held = holders(view)) {
  const cells = new Map();
  const set = (tasks, kind) => tasks.forEach((t) => cells.set(key(t), kind));
  set(member.target.standby, "standby");
  set(member.target.learner, "learner");
  const holds = new Set(member.active.map(key));
  for (const task of member.active) cells.set(key(task), "releasing");
  set(member.revoking, "releasing");
  for (const task of member.target.active) {
    const k = key(task);
    if (holds.has(k)) {
      cells.set(k, "active");
    } else {
      const others = [...(held.get(k) ?? [])].filter((slot) => slot !== member.slot);
      cells.set(k, others.length > 0 ? "moving" : "pending");
    }
  }
  return cells;
}

/** How many tasks are moving: given by a member's target while another
 * member still holds them. */
export function movingCount(view) {
  const held = holders(view);
  let moving = 0;
  for (const member of view.members) {
    for (const kind of memberCells(view, member, held).values()) if (kind === "moving") moving++;
  }
  return moving;
}

/** A member's name as the console shows it. */
export function memberLabel(member) {
  return member.name ?? member.member_id;
}

/** The grid: one row a member, one column a task. */
export function assignmentGrid(view) {
  const all = groupTasks(view);
  const tasks = all.slice(0, GRID_TASKS_MAX);
  const held = holders(view);
  const head = el(
    "tr",
    {},
    el("th", { scope: "col", class: "grid-member", text: "Member" }),
    tasks.map((task) => el("th", { scope: "col", class: "grid-task" }, el("span", { text: taskName(task) }))),
  );
  const rows = view.members.map((member) => {
    const cells = memberCells(view, member, held);
    return el(
      "tr",
      { "data-member": member.member_id },
      el("th", { scope: "row", class: "grid-member", text: memberLabel(member) }),
      tasks.map((task) => {
        const kind = cells.get(key(task));
        const label = `${taskName(task)}: ${kind ? CELL_KINDS[kind].label : "none"}`;
        return el("td", {
          class: `cell ${kind ?? "none"}`,
          "data-task": taskName(task),
          "data-kind": kind ?? "none",
          "aria-label": label,
          title: `${memberLabel(member)} · ${label}`,
          text: kind ? CELL_KINDS[kind].mark : "·",
        });
      }),
    );
  });
  const legend = el(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    Object.values(CELL_KINDS).map((kind) => el("li", {}, el("span", { class: "mark", text: kind.mark }), ` ${kind.label}`)),
  );
  const note = all.length > tasks.length ? el("p", { text: `The first ${tasks.length} of ${all.length} tasks.` }) : null;
  const table = el(
    "table",
    { id: "assignment-grid", class: "grid" },
    el("caption", { text: `Tasks by member (${all.length} tasks, ${movingCount(view)} moving)` }),
    el("thead", {}, head),
    el("tbody", {}, rows),
  );
  return [legend, note, el("div", { class: "scroll", tabindex: "0", "aria-label": "Assignment grid" }, table)];
}
