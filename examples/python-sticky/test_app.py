"""Native tests of app.py, against the stub bindings that build.sh writes to target/bindings.

    ./build.sh && target/venv/bin/python -m unittest -v test_app
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "target", "bindings")]

from componentize_py_types import Err  # noqa: E402
from wit_world.imports import log, types  # noqa: E402

LINES: list[tuple[str, str]] = []
log.log = lambda level, message: LINES.append((level.name, message))

import app  # noqa: E402

N = app.NO_MEMBER


def group(topics, subscriptions, members, active, loads=None, load_capacity=None):
    """members: (capacity, subscription index) pairs; active: one owner per task;
    loads: {task: load} (the group then has a load unit); load_capacity: one per member."""
    load_capacity = load_capacity or [None] * len(members)
    loads = loads or {}
    return types.GroupInput(
        topics=[types.Topic(name=f"t{i}", partitions=p) for i, p in enumerate(topics)],
        subscriptions=subscriptions,
        members=[types.Member(id=f"m{i}", name=None, rack=None, capacity=c, subscription=s,
                              load_capacity=lc, utilisation=None)
                 for i, ((c, s), lc) in enumerate(zip(members, load_capacity))],
        active_owner=active,
        learners=types.TaskMembers(task=[], member=[]),
        standbys=types.TaskMembers(task=[], member=[]),
        lags=types.TaskLags(task=[], member=[], lag=[]),
        params=[],
        load_unit="records/s" if loads else None,
        loads=types.TaskLoads(task=list(loads), load=list(loads.values())),
    )


def assign(gi):
    return app.Assignor().assign(gi).active_owner


def counts(owners, n):
    return [owners.count(m) for m in range(n)]


class Sticky(unittest.TestCase):
    def test_info(self):
        info = app.Assignor().info()
        self.assertEqual((info.name, info.version), ("python-sticky", "0.2.0"))
        self.assertEqual(info.capabilities, types.Capabilities(False, False, False, load=True))

    def test_new_member_takes_only_the_excess(self):
        # m0 holds all 6 tasks; m1 and m2 are new: quota 2 each.
        owners = assign(group([6], [[0]], [(1, 0)] * 3, [0] * 6))
        self.assertEqual(owners[:2], [0, 0])  # m0 keeps its first two
        self.assertEqual(counts(owners, 3), [2, 2, 2])

    def test_a_balanced_group_does_not_move(self):
        active = [0, 1, 2, 0, 1, 2, 0, 1, 2]
        self.assertEqual(assign(group([5, 4], [[0, 1]], [(1, 0)] * 3, active)), active)

    def test_capacity_weights_the_share(self):
        owners = assign(group([12], [[0]], [(1, 0), (2, 0), (3, 0)], [N] * 12))
        self.assertEqual(counts(owners, 3), [2, 4, 6])

    def test_an_owner_that_unsubscribed_loses_the_task(self):
        # m0 now subscribes only to t1 (set 1): its t0 tasks go to m1, the only
        # subscriber left. Quotas: m0 2/2 = 1, m1 2/1 + 2/2 = 3.
        owners = assign(group([2, 2], [[0, 1], [1]], [(1, 1), (1, 0)], [0, 0, 0, 1]))
        self.assertEqual(owners, [1, 1, 0, 1])

    def test_unsubscribed_topic_and_unknown_owner(self):
        # Nobody subscribes to t0; t1's task 2 names no member (7), task 3 none.
        # m1 keeps task 4; task 2 goes to m0 (load 0), task 3 to m0 (tie 1 vs 1: lower index).
        owners = assign(group([2, 3], [[1]], [(1, 0), (1, 0)], [0, 1, 7, N, 1]))
        self.assertEqual(owners, [N, N, 0, 0, 1])

    def test_heterogeneous_subscriptions_stay_valid_and_spread(self):
        # 4 topics; even members subscribe to t0,t1; odd ones to t1,t2,t3.
        subs = [[0, 1], [1, 2, 3]]
        members = [(1 + m % 3, m % 2) for m in range(10)]
        gi = group([7, 11, 5, 13], subs, members, [N] * 36)
        owners = assign(gi)
        topic_of = [t for t, p in enumerate([7, 11, 5, 13]) for _ in range(p)]
        for task, m in enumerate(owners):
            self.assertIn(topic_of[task], subs[members[m][1]])
        # Run again on its own answer: nothing moves.
        gi.active_owner = owners
        self.assertEqual(assign(gi), owners)

    def test_free_tasks_go_to_the_least_loaded_member(self):
        # m0 carries 90, m1 10; m2 left: its tasks 4 and 5 go to m1 (10 -> 30 -> 50).
        loads = {0: 45, 1: 45, 2: 5, 3: 5, 4: 20, 5: 20}
        owners = assign(group([6], [[0]], [(1, 0)] * 2, [0, 0, 1, 1, N, N], loads))
        self.assertEqual(owners, [0, 0, 1, 1, 1, 1])
        # Without loads the same group balances counts.
        self.assertEqual(assign(group([6], [[0]], [(1, 0)] * 2, [0, 0, 1, 1, N, N])), [0, 0, 1, 1, 0, 1])

    def test_an_unknown_load_counts_as_the_mean_of_the_known(self):
        # Known: task 0 -> 30, task 1 -> 10 (mean 20). m0 keeps task 0 (30), m1 task 2
        # (unknown: 20). Task 1 (10) goes to m1 (20 < 30), making 30; task 3 (20) to
        # m0 (30 = 30: the lower index). Were unknown zero, m1 would take both.
        owners = assign(group([4], [[0]], [(1, 0)] * 2, [0, N, 1, N], {0: 30, 1: 10}))
        self.assertEqual(owners, [0, 1, 1, 0])

    def test_load_capacity_weighs_only_when_every_member_declares_one(self):
        loads = {0: 10, 1: 10, 2: 10, 3: 10}
        # m1 can carry three times m0's load: it takes three of the four tasks.
        owners = assign(group([4], [[0]], [(1, 0)] * 2, [N] * 4, loads, [100.0, 300.0]))
        self.assertEqual(counts(owners, 2), [1, 3])
        # One member without a load capacity: capacities weigh (1 and 1).
        owners = assign(group([4], [[0]], [(1, 0)] * 2, [N] * 4, loads, [100.0, None]))
        self.assertEqual(counts(owners, 2), [2, 2])

    def test_wrong_column_length_is_unsupported_input(self):
        with self.assertRaises(Err) as e:
            assign(group([3], [[0]], [(1, 0)], [0]))
        self.assertIsInstance(e.exception.value, types.AssignError_UnsupportedInput)

    def test_logs_one_info_line(self):
        LINES.clear()
        assign(group([3], [[0]], [(1, 0)], [N] * 3))
        self.assertEqual(len(LINES), 1)
        self.assertEqual(LINES[0][0], "INFO")


if __name__ == "__main__":
    unittest.main()
