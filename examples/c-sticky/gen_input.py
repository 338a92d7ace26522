#!/usr/bin/env python3
"""Inputs for `assignd run`, and a stickiness check.

  gen_input.py gen --members 1000 --tasks 100000 [--topics 100] [--new 100] [--mixed] [--loads] > big.json
      A GroupInput: TOPICS topics sharing TASKS tasks; every 4th member has
      capacity 2; the first MEMBERS-NEW members hold the tasks round-robin
      (the last NEW members have just joined). --mixed: odd members subscribe
      to the first half of the topics only. --loads: the group measures
      "records/s": every task has a load from 1 to 10, one in fifty 100 (`loads` rows
      [topic, partition, load]) and every member a `load_capacity` of 1000
      per unit of capacity.
  gen_input.py feed INPUT.json ASSIGNMENT.json > next.json
      INPUT with each member's `active` replaced by its tasks in ASSIGNMENT.
  gen_input.py moved A.json B.json
      How many tasks change owner between two assignments (exit 1 if any).
"""
import argparse
import json
import sys


def gen(args):
    per_topic, extra = divmod(args.tasks, args.topics)
    topics = {f"t{t}": per_topic + (t < extra) for t in range(args.topics)}
    names = list(topics)
    half = names[: max(1, len(names) // 2)]
    members = [
        {
            "id": f"m{m}",
            "capacity": 2 if m % 4 == 0 else 1,
            "topics": half if args.mixed and m % 2 else names,
            "active": [],
        }
        for m in range(args.members)
    ]
    old = max(1, args.members - args.new)
    i = 0
    for name, partitions in topics.items():
        for p in range(partitions):
            # Only to a member that subscribes (a previous assignment was valid).
            while name not in members[i % old]["topics"]:
                i += 1
            members[i % old]["active"].append([name, p])
            i += 1
    doc = {"topics": topics, "members": members, "params": {}}
    if args.loads:
        doc["load_unit"] = "records/s"
        for member in members:
            member["load_capacity"] = 1000 * member["capacity"]
        # A deterministic spread of loads, a few tasks ten times the rest.
        doc["loads"] = [
            [name, p, 100 if (t * 31 + p) % 50 == 0 else 1 + (t * 7 + p * 13) % 10]
            for t, (name, partitions) in enumerate(topics.items())
            for p in range(partitions)
        ]
    json.dump(doc, sys.stdout)


def feed(args):
    with open(args.input) as f:
        doc = json.load(f)
    with open(args.assignment) as f:
        out = json.load(f)
    for member in doc["members"]:
        member["active"] = out[member["id"]]["active"]
    json.dump(doc, sys.stdout)


def owners(path):
    with open(path) as f:
        return {tuple(task): m for m, a in json.load(f).items() for task in a["active"]}


def moved(args):
    a, b = owners(args.a), owners(args.b)
    n = sum(a.get(task) != b.get(task) for task in a.keys() | b.keys())
    print(f"{n} of {len(a.keys() | b.keys())} tasks change owner")
    sys.exit(1 if n else 0)


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
sub = parser.add_subparsers(dest="command", required=True)
p = sub.add_parser("gen")
p.add_argument("--members", type=int, default=1000)
p.add_argument("--tasks", type=int, default=100000)
p.add_argument("--topics", type=int, default=100)
p.add_argument("--new", type=int, default=100, help="members that hold nothing yet")
p.add_argument("--mixed", action="store_true")
p.add_argument("--loads", action="store_true", help="tasks' loads and members' load capacities")
p.set_defaults(run=gen)
p = sub.add_parser("feed")
p.add_argument("input")
p.add_argument("assignment")
p.set_defaults(run=feed)
p = sub.add_parser("moved")
p.add_argument("a")
p.add_argument("b")
p.set_defaults(run=moved)
args = parser.parse_args()
args.run(args)
