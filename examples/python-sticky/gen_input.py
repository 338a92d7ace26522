#!/usr/bin/env python3
"""Write a GroupInput JSON (docs/design.md, "The offline assignor contract") for benchmarks.

    python3 gen_input.py --members 1000 --tasks 100000 --topics 10 --out big.json

Deterministic: the same arguments write the same bytes. The tasks are spread
as evenly as possible over the topics (`topic-0`, `topic-1`, ...); every
member (`member-0`, ... with static names `worker-0`, ...) subscribes to every
topic. To look like a group mid-rebalance, the first `--owners` members
(default: 90%) hold all the tasks round-robin and the others are new; capacities
cycle through `--capacities` (default "1"). The per-task data is in the
members' `active` lists, as a live group's `assignor-input` shows it.
`--loads`: the group measures "records/s": every task has a load (`loads`
rows [topic, partition, load]: 1 to 10, one in fifty 100) and every member
a `load_capacity` of 1000 per unit of capacity.
"""

import argparse
import json
import sys


def with_loads(doc: dict) -> dict:
    """`doc` with a load unit, every task's load and every member's load capacity."""
    doc["load_unit"] = "records/s"
    for member in doc["members"]:
        member["load_capacity"] = 1000 * member["capacity"]
    doc["loads"] = [
        [name, p, 100 if (t * 31 + p) % 50 == 0 else 1 + (t * 7 + p * 13) % 10]
        for t, (name, partitions) in enumerate(doc["topics"].items())
        for p in range(partitions)
    ]
    return doc


def group_input(members: int, tasks: int, topics: int, owners: int, capacities: list[int]) -> dict:
    names = [f"topic-{t}" for t in range(topics)]
    partitions = [tasks // topics + (1 if t < tasks % topics else 0) for t in range(topics)]
    active: list[list[list]] = [[] for _ in range(members)]
    task = 0
    for name, count in zip(names, partitions):
        for p in range(count):
            active[task % owners].append([name, p])
            task += 1
    return {
        "topics": dict(zip(names, partitions)),
        "members": [
            {
                "id": f"member-{m}",
                "name": f"worker-{m}",
                "topics": names,
                "capacity": capacities[m % len(capacities)],
                "active": active[m],
            }
            for m in range(members)
        ],
        "params": {},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, required=True)
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--topics", type=int, default=1)
    ap.add_argument("--owners", type=int, help="members holding the tasks now (default: 90%%, at least 1)")
    ap.add_argument("--capacities", default="1", help="comma-separated, cycled over the members")
    ap.add_argument("--loads", action="store_true", help="tasks' loads and members' load capacities")
    ap.add_argument("--out", default="-", help="file to write, - for stdout (default)")
    a = ap.parse_args()
    if a.members < 1 or a.tasks < 0 or a.topics < 1:
        ap.error("--members and --topics must be at least 1, --tasks at least 0")
    owners = a.owners if a.owners is not None else max(1, a.members * 9 // 10)
    if not 1 <= owners <= a.members:
        ap.error("--owners must be between 1 and --members")
    try:
        capacities = [int(c) for c in a.capacities.split(",")]
    except ValueError:
        ap.error("--capacities: comma-separated integers")
    if min(capacities) < 1:
        ap.error("--capacities must be at least 1")

    doc = group_input(a.members, a.tasks, a.topics, owners, capacities)
    if a.loads:
        doc = with_loads(doc)
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
