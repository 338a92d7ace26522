package dev.assignd.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What the application has been told, and what it must be told next: the
 * member's side of incremental cooperative rebalancing, without I/O or time.
 *
 * <p>Three rules: a task the host moves to {@code revoking} is reported owned
 * until the application acknowledges releasing it, and never after; a task
 * the host gives (back) while it is still being released is granted only
 * after that acknowledgement; the {@code owned} report never names a task the
 * host's last answer does not hold for this member (the host refuses it).
 */
final class Tracker {

    private final SortedSet<Task> active = new TreeSet<>();
    /** Tasks being released, by the acknowledgement that releases them. */
    private final SortedMap<Task, Long> revoking = new TreeMap<>();
    private final Copies learner = new Copies();
    private final Copies standby = new Copies();
    private boolean draining;
    /** What the host's last answer holds for this member (active and revoking). */
    private SortedSet<Task> hostHeld = new TreeSet<>();
    private SortedSet<Task> hostActive = new TreeSet<>();
    /** Acknowledgement ids are never reused, so one from before a reset matches nothing. */
    private long nextAck;

    Assignment assignment() {
        return new Assignment(active, new TreeSet<>(revoking.keySet()), learner.told, standby.told, draining);
    }

    /** The {@code owned} report: held tasks the host still counts as this member's. */
    List<Task> owned() {
        SortedSet<Task> owned = new TreeSet<>();
        for (Task task : active) {
            if (hostHeld.contains(task)) {
                owned.add(task);
            }
        }
        for (Task task : revoking.keySet()) {
            if (hostHeld.contains(task)) {
                owned.add(task);
            }
        }
        return new ArrayList<>(owned);
    }

    /** Applies a heartbeat answer; returns what the application must learn, in order. */
    List<MemberEvent> onResponse(HeartbeatResponse response) {
        List<MemberEvent> changes = new ArrayList<>();
        hostActive = new TreeSet<>(response.active());
        hostHeld = new TreeSet<>(response.active());
        hostHeld.addAll(response.revoking());

        SortedSet<Task> lost = new TreeSet<>(active);
        lost.removeAll(hostHeld);
        if (!lost.isEmpty()) {
            active.removeAll(lost);
            changes.add(new MemberEvent.Lost(new ArrayList<>(lost)));
        }
        SortedSet<Task> revoked = new TreeSet<>(active);
        revoked.retainAll(response.revoking());
        if (!revoked.isEmpty()) {
            long ack = nextAck++;
            active.removeAll(revoked);
            revoked.forEach(task -> revoking.put(task, ack));
            changes.add(new MemberEvent.Revoked(ack, new ArrayList<>(revoked)));
        }

        SortedSet<Task> granted = grantable();
        Split split = splitWarm(granted);
        long epoch = response.memberEpoch();
        Copies.Update learners = learner.update(response.learner(), granted, epoch);
        Copies.Update standbys = standby.update(response.standby(), granted, epoch);
        active.addAll(granted);

        addIfAny(changes, learners.stopped(), MemberEvent.LearnerStopped::new);
        addIfAny(changes, standbys.stopped(), MemberEvent.StandbyStopped::new);
        addIfAny(changes, split.promoted(), MemberEvent.Promoted::new);
        addIfAny(changes, split.assigned(), MemberEvent.Assigned::new);
        addIfAny(changes, learners.started(), MemberEvent.LearnerStarted::new);
        addIfAny(changes, standbys.started(), MemberEvent.StandbyStarted::new);
        if (response.draining() && !draining) {
            changes.add(new MemberEvent.Draining());
        }
        draining = response.draining();
        if (response.drained()) {
            changes.add(new MemberEvent.Drained());
        }
        return changes;
    }

    /**
     * The application released the tasks of acknowledgement {@code ack}. Returns
     * what that unblocks (tasks the host gave back meanwhile), or {@code null}
     * for an unknown ack (from before a reset, or acknowledged twice).
     */
    List<MemberEvent> onAck(long ack) {
        if (!revoking.values().removeIf(a -> a == ack)) {
            return null;
        }
        SortedSet<Task> granted = grantable();
        Split split = splitWarm(granted);
        active.addAll(granted);
        List<MemberEvent> changes = new ArrayList<>();
        addIfAny(changes, split.promoted(), MemberEvent.Promoted::new);
        addIfAny(changes, split.assigned(), MemberEvent.Assigned::new);
        return changes;
    }

    /** Whether {@code task} is active here (not being released). */
    boolean isActive(Task task) {
        return active.contains(task);
    }

    boolean holdsAny() {
        return !active.isEmpty() || !revoking.isEmpty();
    }

    boolean isReleasing() {
        return !revoking.isEmpty();
    }

    /**
     * Forgets everything (fenced, removed, the lease ran out, a rejoin as a new
     * member); returns every task the application held, active or being released.
     */
    List<Task> reset() {
        SortedSet<Task> held = new TreeSet<>(active);
        held.addAll(revoking.keySet());
        active.clear();
        revoking.clear();
        learner.clear();
        standby.clear();
        draining = false;
        hostHeld = new TreeSet<>();
        hostActive = new TreeSet<>();
        return new ArrayList<>(held);
    }

    /** Tasks the host gives as active that the application has not got and is not releasing. */
    private SortedSet<Task> grantable() {
        SortedSet<Task> granted = new TreeSet<>();
        for (Task task : hostActive) {
            if (!active.contains(task) && !revoking.containsKey(task)) {
                granted.add(task);
            }
        }
        return granted;
    }

    private record Split(List<Task> promoted, List<Task> assigned) {
    }

    /** Splits newly granted tasks into promoted copies and cold assignments, and forgets the copies. */
    private Split splitWarm(SortedSet<Task> granted) {
        List<Task> promoted = new ArrayList<>();
        List<Task> assigned = new ArrayList<>();
        for (Task task : granted) {
            (learner.told.contains(task) || standby.told.contains(task) ? promoted : assigned).add(task);
        }
        learner.promote(granted);
        standby.promote(granted);
        return new Split(promoted, assigned);
    }

    private static void addIfAny(
            List<MemberEvent> changes, List<Task> tasks, java.util.function.Function<List<Task>, MemberEvent> event) {
        if (!tasks.isEmpty()) {
            changes.add(event.apply(tasks));
        }
    }

    /**
     * Warm copies of one kind (learners or standbys) as the application was
     * told them. When a learner catches up, the host makes the task active here
     * but grants it only once its old owner released it; meanwhile the answers
     * list it nowhere. So a copy the answers stop listing is kept (still
     * warming, its lag still reported) until it is granted (promoted), or an
     * answer at a higher member epoch leaves it out, or {@link #AWAIT_ANSWERS_MAX}
     * answers went by (stopped).
     */
    private static final class Copies {
        static final int AWAIT_ANSWERS_MAX = 10;

        SortedSet<Task> told = new TreeSet<>();
        /** Told copies the answers no longer list: the epoch of the answer that dropped each, and answers left. */
        final Map<Task, long[]> awaiting = new HashMap<>();

        record Update(List<Task> started, List<Task> stopped) {
        }

        Update update(SortedSet<Task> listed, SortedSet<Task> granted, long epoch) {
            List<Task> started = new ArrayList<>();
            for (Task task : listed) {
                if (!told.contains(task)) {
                    started.add(task);
                }
            }
            List<Task> stopped = new ArrayList<>();
            for (Task task : told) {
                if (listed.contains(task) || granted.contains(task)) {
                    continue;
                }
                long[] wait = awaiting.get(task);
                if (wait == null) {
                    awaiting.put(task, new long[] {epoch, AWAIT_ANSWERS_MAX});
                    continue;
                }
                wait[1] = Math.max(0, wait[1] - 1);
                if (epoch > wait[0] || wait[1] == 0) {
                    awaiting.remove(task);
                    stopped.add(task);
                }
            }
            awaiting.keySet().removeIf(task -> listed.contains(task) || granted.contains(task));
            SortedSet<Task> now = new TreeSet<>(listed);
            now.addAll(awaiting.keySet());
            told = now;
            return new Update(started, stopped);
        }

        void promote(SortedSet<Task> granted) {
            told.removeAll(granted);
            awaiting.keySet().removeAll(granted);
        }

        void clear() {
            told = new TreeSet<>();
            awaiting.clear();
        }
    }
}
