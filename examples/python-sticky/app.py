"""python-sticky: a sticky, capacity-weighted assignor for assignd, in Python.

Every task stays with its current active owner while that member still
subscribes to the task's topic and holds fewer tasks than its fair share:

    quota(m) = ceil(capacity(m) * sum over m's topics t of
                    partitions(t) / total capacity of t's subscribers)

Every other task goes to the subscriber of its topic with the lowest
load / capacity, ties to the lowest member index. Tasks of a topic nobody
subscribes to get NO_MEMBER. No learners or standbys are placed: the host
warms up every move itself.

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
VERSION = "0.1.0"
NO_MEMBER = 0xFFFFFFFF


class Assignor(exports.Assignor):
    def info(self) -> types.AssignorInfo:
        return types.AssignorInfo(
            name=NAME,
            version=VERSION,
            description=(
                "sticky, capacity-weighted: a task stays with its owner while the owner "
                "is within its fair share; the rest go to the least-loaded subscriber "
                "(load / capacity). Written in Python."
            ),
            capabilities=types.Capabilities(learners=False, standbys=False, racks=False),
            params=[],
        )

    def assign(self, input: types.GroupInput) -> types.Assignment:
        owners, kept, unowned = sticky(input)
        moved = sum(1 for new, old in zip(owners, input.active_owner) if new != old)
        log.log(
            log.Level.INFO,
            f"{NAME} {VERSION}: {len(owners)} tasks over {len(input.members)} members: "
            f"{kept} kept, {moved} change owner, {unowned} without subscriber",
        )
        return types.Assignment(
            active_owner=owners,
            learners=types.TaskMembers(task=[], member=[]),
            standbys=types.TaskMembers(task=[], member=[]),
        )


def unsupported(message: str) -> Err:
    return Err(types.AssignError_UnsupportedInput(message))


def sticky(input: types.GroupInput) -> tuple[list[int], int, int]:
    """The assignment as (active owner per task, tasks kept, tasks without subscriber)."""
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

    # 1. Keep: a task stays with its owner while the owner subscribes and is under quota.
    owners = [NO_MEMBER] * n_tasks
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
            if m < n_members and subscribes[set_of[m]] and load[m] < quota[m]:
                owners[task] = m
                load[m] += 1
            else:
                left.append(task)
        if left:
            pending.append((t, left))
    kept = n_tasks - unowned - sum(len(left) for _, left in pending)

    # 2. Place: each remaining task to the least-loaded subscriber of its topic.
    # One heap of (load / capacity, member) per distinct subscriber set. Loads
    # only grow, so an entry made stale by another heap's placement is an
    # underestimate: refresh it when it reaches the top, and the first fresh
    # top is the true minimum.
    heaps: dict[tuple[int, ...], list[tuple[float, int]]] = {}
    heapreplace = heapq.heapreplace
    for t, left in pending:
        key = tuple(topic_sets[t])
        heap = heaps.get(key)
        if heap is None:
            heap = [(load[m] / capacity[m], m) for s in key for m in set_members[s]]
            heapq.heapify(heap)
            heaps[key] = heap
        for task in left:
            score, m = heap[0]
            while score != load[m] / capacity[m]:
                heapreplace(heap, (load[m] / capacity[m], m))
                score, m = heap[0]
            owners[task] = m
            load[m] += 1
            heapreplace(heap, (load[m] / capacity[m], m))

    return owners, kept, unowned
