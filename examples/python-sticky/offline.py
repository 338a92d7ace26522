#!/usr/bin/env python3
"""Run app.py on a GroupInput JSON without assignd: natively, or as the built component.

    target/venv/bin/python offline.py INPUT.json              # app.py in this Python
    target/tools/bin/python offline.py INPUT.json --wasm      # target/python-sticky.wasm in wasmtime-py

It prints the Assignment JSON on stdout (the shape `assignd run` prints) and
one line of timings and the assignor's log lines on stderr. `--wasm` needs the
`wasmtime` package (pip install wasmtime; 51 runs components). This is a
development aid: `assignd run` is the reference (same sandbox, limits and
validation as a live group).

The conversion follows the WIT: topics in the order of the JSON object,
tasks numbered densely topic after topic, members in input order, one
subscription per distinct set of (known) topics. Loads are optional:
`"load_unit": "records/s"`, members' `"load_capacity"` and `"utilisation"`,
and `"loads": [[topic, partition, load], ...]` for the tasks whose load is
known (rows of unknown topics or partitions are left out).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NO_MEMBER = 0xFFFFFFFF


def to_columns(doc: dict) -> dict:
    """The GroupInput JSON as the WIT's group-input, in plain dicts and lists."""
    names = list(doc["topics"])
    index = {name: i for i, name in enumerate(names)}
    first, n = {}, 0
    for name in names:
        first[name] = n
        n += doc["topics"][name]
    active = [NO_MEMBER] * n
    sets: dict[tuple, int] = {}
    members = []
    for m, mem in enumerate(doc["members"]):
        key = tuple(sorted({index[t] for t in mem.get("topics", []) if t in index}))
        members.append({
            "id": mem["id"], "name": mem.get("name"), "rack": mem.get("rack"),
            "capacity": mem.get("capacity", 1), "subscription": sets.setdefault(key, len(sets)),
            "load_capacity": mem.get("load_capacity"), "utilisation": mem.get("utilisation"),
        })
        for topic, p in mem.get("active", []):
            if topic in index and p < doc["topics"][topic]:
                active[first[topic] + p] = m
    known = [row for row in doc.get("loads", []) if row[0] in index and 0 <= row[1] < doc["topics"][row[0]]]
    return {
        "topics": [{"name": t, "partitions": doc["topics"][t]} for t in names],
        "subscriptions": [list(k) for k in sets],
        "members": members,
        "active-owner": active,
        "learners": {"task": [], "member": []},
        "standbys": {"task": [], "member": []},
        "lags": {"task": [], "member": [], "lag": []},
        "params": [{"key": k, "value": v} for k, v in doc.get("params", {}).items()],
        "load-unit": doc.get("load_unit"),
        "loads": {"task": [first[t] + p for t, p, _ in known], "load": [float(x) for _, _, x in known]},
    }


def to_json(doc: dict, owners: list[int]) -> dict:
    """An active-owner column as the offline contract's Assignment JSON."""
    out = {m["id"]: {"active": [], "learner": [], "standby": []} for m in doc["members"]}
    ids = [m["id"] for m in doc["members"]]
    task = 0
    for name, count in doc["topics"].items():
        for p in range(count):
            if owners[task] != NO_MEMBER:
                out[ids[owners[task]]]["active"].append([name, p])
            task += 1
    return out


def run_native(cols: dict) -> tuple[list[int], list[str]]:
    sys.path[:0] = [HERE, os.path.join(HERE, "target", "bindings")]
    from wit_world.imports import log, types

    lines: list[str] = []
    log.log = lambda level, message: lines.append(f"{level.name.lower()}: {message}")
    import app

    gi = types.GroupInput(
        topics=[types.Topic(**t) for t in cols["topics"]],
        subscriptions=cols["subscriptions"],
        members=[types.Member(**m) for m in cols["members"]],
        active_owner=cols["active-owner"],
        learners=types.TaskMembers(**cols["learners"]),
        standbys=types.TaskMembers(**cols["standbys"]),
        lags=types.TaskLags(**cols["lags"]),
        params=[types.Param(**p) for p in cols["params"]],
        load_unit=cols["load-unit"],
        loads=types.TaskLoads(**cols["loads"]),
    )
    return app.Assignor().assign(gi).active_owner, lines


def run_wasm(cols: dict, path: str) -> tuple[list[int], list[str]]:
    from wasmtime import Config, Engine, Store
    from wasmtime.component import Component, Linker, Record, Variant

    def record(d):  # nested dicts -> wasmtime-py Records (kebab-case attributes)
        if isinstance(d, dict):
            r = Record()
            for k, v in d.items():
                setattr(r, k.replace("_", "-"), record(v))
            return r
        if isinstance(d, list):
            return [record(x) for x in d]
        return d

    lines: list[str] = []
    t0 = time.perf_counter()
    engine = Engine(Config())
    component = Component.from_file(engine, path)
    t1 = time.perf_counter()
    linker = Linker(engine)
    with linker.root() as root:
        with root.add_instance("assignd:assignor/log@0.2.0") as log:
            log.add_func("log", lambda store, level, message: lines.append(f"{level}: {message}"))
    store = Store(engine)
    instance = linker.instantiate(store, component)
    iface = instance.get_export_index(store, "assignd:assignor/assignor@0.2.0")
    assign = instance.get_func(store, instance.get_export_index(store, "assign", iface))
    t2 = time.perf_counter()
    result = assign(store, record(cols))
    t3 = time.perf_counter()
    print(f"wasmtime-py: compile {t1 - t0:.1f} s, instantiate {(t2 - t1) * 1e3:.0f} ms, "
          f"call {(t3 - t2) * 1e3:.0f} ms (with wasmtime-py's conversion of the values)", file=sys.stderr)
    if isinstance(result, Variant):
        sys.exit(f"error: the assignor refused: {result.tag}: {result.payload}")
    return getattr(result, "active-owner"), lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--wasm", nargs="?", const=os.path.join(HERE, "target", "python-sticky.wasm"),
                    metavar="FILE", help="run this component (default target/python-sticky.wasm)")
    a = ap.parse_args()
    with open(a.input) as f:
        doc = json.load(f)
    cols = to_columns(doc)
    t0 = time.perf_counter()
    owners, lines = run_wasm(cols, a.wasm) if a.wasm else run_native(cols)
    elapsed = time.perf_counter() - t0
    for line in lines:
        print(line, file=sys.stderr)
    print(f"{'wasm' if a.wasm else 'native'}: {len(owners)} tasks in {elapsed * 1e3:.0f} ms", file=sys.stderr)
    json.dump(to_json(doc, owners), sys.stdout, separators=(",", ":"))
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
