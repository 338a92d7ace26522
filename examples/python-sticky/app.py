"""python-sticky: a sticky, capacity-weighted assignor for assignd, in Python.

Every task stays with its current active owner while that member still
subscribes to the task's topic and holds fewer tasks than its fair share:

    quota(m) = ceil(capacity(m) * sum over m's topics t of
                    partitions(t) / total capacity of t's subscribers)

Every other task goes to the subscriber of its topic with the lowest
load / capacity, ties to the lowest member index, load being the tasks it
was given. When the group reports loads (a load unit and at least one
task's load), load is the sum of those tasks' loads instead, and the weight
is the members' load capacity if every member declared one (else their
capacity). A task whose load the host does not know yet counts as the mean
of the known ones: unknown is not zero. Tasks of a topic nobody subscribes
to get NO_MEMBER. No learners or standbys are placed: the host warms up
every move itself.

componentize-py maps the WIT export `assign: func(...) -> result<assignment,
assign-error>` to a method that *returns* the assignment (ok) or *raises*
`Err(<an assign-error case>)` (err).
"""

import heapq
import math
from fractions import Fraction

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log, types

NAME = "python-sticky"
VERSION = "0.2.0"
NO_MEMBER = 0xFFFFFFFF


class Assignor(exports.Assignor):
    def info(self) -> types.AssignorInfo:
        return types.AssignorInfo(
            name=NAME,
            version=VERSION,
            description=(
                "sticky, capacity-weighted: a task stays with its owner while the owner "
                "is within its fair share; the rest go to the least-loaded subscriber "
                "(load / capacity), by the tasks' reported loads when the group has them. "
                "Written in Python."
            ),
            capabilities=types.Capabilities(learners=False, standbys=False, racks=False, load=True),
            params=[],
        )

    def assign(self, input: types.GroupInput) -> types.Assignment:
        owners, kept, unowned, by_load = sticky(input)
        moved = sum(1 for new, old in zip(owners, input.active_owner) if new != old)
        by = f"by load ({input.load_unit})" if by_load else "by task count"
        log.log(
            log.Level.INFO,
            f"{NAME} {VERSION}: {len(owners)} tasks over {len(input.members)} members: "
            f"{kept} kept, {moved} change owner {by}, {unowned} without subscriber",
        )
        return types.Assignment(
            active_owner=owners,
            learners=types.TaskMembers(task=[], member=[]),
            standbys=types.TaskMembers(task=[], member=[]),
        )


def unsupported(message: str) -> Err:
    return Err(types.AssignError_UnsupportedInput(message))


def task_loads(input: types.GroupInput) -> list[float] | None:
    """Each task's load, or None when the group reports no loads (then tasks are counted).

    A task the host has no load for (a member just joined, the host restarted)
    counts as the mean of the known ones: unknown is not zero.
    """
    n_tasks = len(input.active_owner)
    known = {t: load for t, load in zip(input.loads.task, input.loads.load) if t < n_tasks}
    if input.load_unit is None or not known:
        return None
    mean = sum(known.values()) / len(known)
    return [known.get(task, mean) for task in range(n_tasks)]


def sticky(input: types.GroupInput) -> tuple[list[int], int, int, bool]:
    """The assignment as (active owner per task, tasks kept, tasks without subscriber, placed by load)."""
    topics = input.topics
    members = input.members
    subscriptions = input.subscriptions
    current = input.active_owner
    n_topics, n_members, n_sets = len(topics), len(members), len(subscriptions)

    # Tasks are dense: topic t owns first[t] .. first[t] + partitions(t).
    first = []
    n_tasks = 0
    for topic in topics:
        first.append(n_tasks)
        n_tasks += topic.partitions
    if len(current) != n_tasks:
        raise unsupported(f"active-owner has {len(current)} entries for {n_tasks} tasks")

    # Members by subscription set (groups have few distinct sets).
    capacity = [max(1, m.capacity) for m in members]
    set_of = [m.subscription for m in members]
    set_members: list[list[int]] = [[] for _ in range(n_sets)]
    set_capacity = [0] * n_sets
    for m, s in enumerate(set_of):
        if s >= n_sets:
            raise unsupported(f"member {members[m].id} has subscription {s} of {n_sets}")
        set_members[s].append(m)
        set_capacity[s] += capacity[m]

    # The topics of each set that exist, and the sets (with members) subscribing each topic.
    set_topics = [sorted({t for t in topics_ if t < n_topics}) for topics_ in subscriptions]
    topic_sets: list[list[int]] = [[] for _ in range(n_topics)]
    for s, ts in enumerate(set_topics):
        if set_members[s]:
            for t in ts:
                topic_sets[t].append(s)
    topic_capacity = [sum(set_capacity[s] for s in sets) for sets in topic_sets]

    # Fair share per unit of capacity of each set, exactly; then each member's quota.
    share = [
        sum((Fraction(topics[t].partitions, topic_capacity[t]) for t in ts), Fraction(0))
        if set_members[s]
        else Fraction(0)
        for s, ts in enumerate(set_topics)
    ]
    quota = [math.ceil(share[s] * c) for s, c in zip(set_of, capacity)]

    # What a task weighs (1 without loads) and what a member carries per unit of it.
    loads = task_loads(input)
    cost = loads if loads is not None else [1] * n_tasks
    load_capacity = [m.load_capacity for m in members]
    by_load_capacity = loads is not None and all(c is not None and c > 0 for c in load_capacity)
    weight = load_capacity if by_load_capacity else capacity

    # 1. Keep: a task stays with its owner while the owner subscribes and is under quota.
    owners = [NO_MEMBER] * n_tasks
    held = [0] * n_members
    load = [0] * n_members
    pending: list[tuple[int, list[int]]] = []  # (topic, tasks to place)
    unowned = 0
    for t, sets in enumerate(topic_sets):
        start, end = first[t], first[t] + topics[t].partitions
        if not sets:
            unowned += end - start
            continue
        subscribes = bytearray(n_sets)
        for s in sets:
            subscribes[s] = 1
        left = []
        for task in range(start, end):
            m = current[task]
            if m < n_members and subscribes[set_of[m]] and held[m] < quota[m]:
                owners[task] = m
                held[m] += 1
                load[m] += cost[task]
            else:
                left.append(task)
        if left:
            pending.append((t, left))
    kept = n_tasks - unowned - sum(len(left) for _, left in pending)

    # 2. Place: each remaining task to the least-loaded subscriber of its topic.
    # One heap of (load / weight, member) per distinct subscriber set. Loads
    # only grow (a load is never negative), so an entry made stale by another heap's placement is an
    # underestimate: refresh it when it reaches the top, and the first fresh
    # top is the true minimum.
    heaps: dict[tuple[int, ...], list[tuple[float, int]]] = {}
    heapreplace = heapq.heapreplace
    for t, left in pending:
        key = tuple(topic_sets[t])
        heap = heaps.get(key)
        if heap is None:
            heap = [(load[m] / weight[m], m) for s in key for m in set_members[s]]
            heapq.heapify(heap)
            heaps[key] = heap
        for task in left:
            score, m = heap[0]
            while score != load[m] / weight[m]:
                heapreplace(heap, (load[m] / weight[m], m))
                score, m = heap[0]
            owners[task] = m
            load[m] += cost[task]
            heapreplace(heap, (load[m] / weight[m], m))

    return owners, kept, unowned, loads is not None
