#!/usr/bin/env python3
"""Write a GroupInput JSON (the offline contract of DESIGN.md) for load tests.

  gen_input.py MEMBERS TASKS [--topics N] [--active none|spread|skewed]
               [--capacity 1|mixed] [--loads] [--refeed ASSIGNMENT.json INPUT.json]

--active spread: every task starts on some member (round-robin), so a run
shows the cost of keeping; none: nobody owns anything yet (everything is
placed); skewed: the first tenth of the members own everything.
--loads: the group measures "records/s": every task has a load (1 to 10,
one in fifty 100) and every member a load capacity of 1000 per unit of
capacity.
--refeed: write INPUT again with each member's `active` taken from an
assignment printed by `assignd run` (to check that nothing moves).
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("members", type=int, nargs="?")
    p.add_argument("tasks", type=int, nargs="?")
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--active", choices=["none", "spread", "skewed"], default="none")
    p.add_argument("--capacity", choices=["1", "mixed"], default="1")
    p.add_argument("--loads", action="store_true")
    p.add_argument("--refeed", nargs=2, metavar=("ASSIGNMENT", "INPUT"))
    a = p.parse_args()

    if a.refeed:
        with open(a.refeed[0]) as f:
            out = json.load(f)
        with open(a.refeed[1]) as f:
            doc = json.load(f)
        for m in doc["members"]:
            m["active"] = out[m["id"]]["active"]
        json.dump(doc, sys.stdout, separators=(",", ":"))
        return

    if a.members is None or a.tasks is None:
        p.error("MEMBERS and TASKS are required")
    topics = {}
    base, rest = divmod(a.tasks, a.topics)
    for t in range(a.topics):
        topics[f"topic-{t}"] = base + (1 if t < rest else 0)
    names = list(topics)
    members = [
        {
            "id": f"m{m}",
            "name": f"worker-{m}",
            "topics": names,
            "capacity": 1 if a.capacity == "1" else 1 + m % 3,
            "active": [],
        }
        for m in range(a.members)
    ]
    owners = a.members if a.active == "spread" else max(1, a.members // 10)
    if a.active != "none":
        i = 0
        for name, parts in topics.items():
            for part in range(parts):
                members[i % owners]["active"].append([name, part])
                i += 1
    doc = {"topics": topics, "members": members, "params": {}}
    if a.loads:
        doc["load_unit"] = "records/s"
        for m in members:
            m["load_capacity"] = 1000 * m["capacity"]
        doc["loads"] = [
            [name, part, 100 if (t * 31 + part) % 50 == 0 else 1 + (t * 7 + part * 13) % 10]
            for t, (name, parts) in enumerate(topics.items())
            for part in range(parts)
        ]
    json.dump(doc, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
