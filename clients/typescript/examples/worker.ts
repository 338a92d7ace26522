/**
 * The example worker: an assignd member with simulated stateful tasks,
 * the same in every language (see clients/README.md). It prints one JSON
 * object per line on stdout for each event, with the wall-clock time;
 * logs go to stderr. SIGTERM or SIGINT drains (ask, wait for `drained`,
 * leave, exit 0); a second signal leaves at once.
 *
 *   node dist/examples/worker.js --url http://127.0.0.1:7070 --group billing --topics orders
 */

import { writeSync } from "node:fs";
import { parseArgs } from "node:util";

import { checkEndpoint, Member, MemberStopReason, Task } from "../src/index";
import { TaskStates } from "./state";

/** How often the simulation advances. */
const TICK_MS = 100;

function emit(event: string, fields: Record<string, unknown> = {}): void {
  // Written at once: the end-to-end suite reads the lines as they come.
  writeSync(1, JSON.stringify({ ts_ms: Date.now(), event, ...fields }) + "\n");
}

const pairs = (tasks: Task[]): [string, number][] => tasks.map((t) => [t.topic, t.partition]);

interface Args {
  urls: string;
  group: string;
  name: string | null;
  topics: string[];
  replayRate: number;
  changelogLen: number;
  processRate: number;
  stateDir: string;
  drainAfterS: number | null;
  token: string | null;
  endpoint: string | null;
  metadata: Record<string, string>;
  /** The synthetic load reported for every active task; null: none. */
  loadPerTask: number | null;
}

function count(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) usage(`--${flag} must be a whole number, not ${JSON.stringify(value)}`);
  return n;
}

function load(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1e15) {
    usage(`--load-per-task must be a number from 0 to 1e15, not ${JSON.stringify(value)}`);
  }
  return n;
}

function usage(message: string): never {
  process.stderr.write(
    `worker: ${message}\nusage: worker --group NAME --topics A,B [--url URL[,URL...]] [--name NAME] ` +
      `[--replay-rate N] [--changelog-len N] [--process-rate N] [--state-dir DIR] [--drain-after S] [--token TOKEN]\n` +
      `              [--endpoint URL] [--metadata KEY=VALUE]... [--load-per-task LOAD]\n`,
  );
  process.exit(2);
}

function parse(argv: string[]): Args {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        url: { type: "string" },
        group: { type: "string" },
        name: { type: "string" },
        topics: { type: "string" },
        "replay-rate": { type: "string" },
        "changelog-len": { type: "string" },
        "process-rate": { type: "string" },
        "state-dir": { type: "string" },
        "drain-after": { type: "string" },
        token: { type: "string" },
        endpoint: { type: "string" },
        metadata: { type: "string", multiple: true },
        "load-per-task": { type: "string" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    usage(error instanceof Error ? error.message : String(error));
  }
  if (!values.group) usage("--group is required");
  const topics = (values.topics ?? "").split(",").map((t) => t.trim()).filter((t) => t !== "");
  if (topics.length === 0) usage("--topics is required");
  const metadata: Record<string, string> = {};
  for (const pair of values.metadata ?? []) {
    const at = pair.indexOf("=");
    if (at < 0) usage(`--metadata ${JSON.stringify(pair)}: KEY=VALUE expected`);
    metadata[pair.slice(0, at)] = pair.slice(at + 1);
  }
  try {
    checkEndpoint(values.endpoint ?? null, metadata);
  } catch (error) {
    usage(error instanceof Error ? error.message : String(error));
  }
  return {
    urls: values.url ?? "http://127.0.0.1:7070",
    group: values.group,
    name: values.name ?? null,
    topics,
    replayRate: count("replay-rate", values["replay-rate"], 1000),
    changelogLen: count("changelog-len", values["changelog-len"], 10_000),
    processRate: count("process-rate", values["process-rate"], 5),
    stateDir: values["state-dir"] ?? "worker-state",
    drainAfterS: values["drain-after"] === undefined ? null : count("drain-after", values["drain-after"], 0),
    token: values.token ?? process.env.ASSIGND_MEMBER_TOKEN ?? null,
    endpoint: values.endpoint ?? null,
    metadata,
    loadPerTask: values["load-per-task"] === undefined ? null : load(values["load-per-task"]),
  };
}

function main(): void {
  const args = parse(process.argv.slice(2));
  const states = new TaskStates(args.stateDir, args.changelogLen, {
    replayPerS: args.replayRate,
    processPerS: args.processRate,
  });
  if (args.name !== null) states.useCheckpointDir(args.name);

  const member = Member.start(
    {
      url: args.urls,
      group: args.group,
      topics: args.topics,
      memberName: args.name,
      memberToken: args.token,
      endpoint: args.endpoint,
      metadata: args.metadata,
      lags: (assignment) => states.lags([...assignment.learner, ...assignment.standby]),
    },
    {
      joined: (memberId) => {
        states.useCheckpointDir(memberId);
        emit("joined", { member_id: memberId });
      },
      assigned: (tasks, { promoted }) => {
        emit(promoted ? "promoted" : "assigned", { tasks: pairs(tasks) });
        states.activate(tasks);
      },
      revoked: (tasks) => {
        // Processing is synchronous here: out of the table, a task is
        // stopped; the member acknowledges once this returns.
        emit("revoked", { tasks: pairs(tasks) });
        states.stop(tasks, "active");
      },
      lost: (tasks) => {
        emit("lost", { tasks: pairs(tasks) });
        states.stop(tasks, "active");
      },
      learnerStarted: (tasks) => {
        emit("learner_started", { tasks: pairs(tasks) });
        states.warm(tasks);
      },
      learnerStopped: (tasks) => {
        emit("learner_stopped", { tasks: pairs(tasks) });
        states.stop(tasks, "warming");
      },
      standbyStarted: (tasks) => {
        emit("standby_started", { tasks: pairs(tasks) });
        states.warm(tasks);
      },
      standbyStopped: (tasks) => {
        emit("standby_stopped", { tasks: pairs(tasks) });
        states.stop(tasks, "warming");
      },
      draining: () => emit("draining"),
      drained: () => emit("drained"),
      fenced: (rejoining) => emit("fenced", { rejoining }),
      replaced: (memberName) => emit("replaced", { member_name: memberName }),
      error: (error) => emit("error", { message: error.message }),
    },
  );

  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    states.tick(now - last, (t) => member.mayProcess(t));
    last = now;
    // Sent only once the host asks, and only what moved.
    const perTask = args.loadPerTask;
    if (perTask !== null) member.reportLoad(member.assignment.active.map((t) => [t, perTask] as const));
  }, TICK_MS);
  const drainTimer = args.drainAfterS === null ? null : setTimeout(() => member.drain(), args.drainAfterS * 1000);

  let signals = 0;
  const onSignal = (): void => {
    signals += 1;
    if (signals === 1) {
      member.drain();
    } else {
      member.leave().catch((error) => process.stderr.write(`worker: the leave failed: ${error}\n`));
    }
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);

  void member.closed.then((reason: MemberStopReason) => {
    clearInterval(ticker);
    if (drainTimer !== null) clearTimeout(drainTimer);
    emit("stopped", { reason });
    process.exit(reason === "left" || reason === "drained" ? 0 : 1);
  });
}

main();
