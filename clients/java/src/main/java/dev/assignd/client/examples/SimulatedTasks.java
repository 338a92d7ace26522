package dev.assignd.client.examples;

import dev.assignd.client.Assignment;
import dev.assignd.client.Lag;
import dev.assignd.client.Task;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;

/**
 * The simulated stateful tasks of one worker (as the Rust client's
 * {@code simulated::TaskStates}). An active task first restores (replays its
 * changelog from the checkpoint at the replay rate), then processes: appends
 * to its changelog at the process rate and keeps its checkpoint at the end. A
 * learner or standby replays and reports {@code end - checkpoint} as its lag.
 * Not thread-safe: the worker locks it.
 */
final class SimulatedTasks {

    enum Role {
        /** Restoring, then processing. */
        ACTIVE,
        /** A learner or standby: replaying. */
        WARMING
    }

    private final DirStore store;
    private final long replayPerS;
    private final long processPerS;
    private final Map<Task, Role> roles = new TreeMap<>();
    /** Fractions of records carried between ticks. */
    private final Map<Task, Double> credit = new TreeMap<>();

    SimulatedTasks(DirStore store, long replayPerS, long processPerS) {
        this.store = store;
        this.replayPerS = replayPerS;
        this.processPerS = processPerS;
    }

    /** Gives {@code tasks} a role, or none (the state stays, as on disk). */
    void set(Collection<Task> tasks, Role role) {
        for (Task task : tasks) {
            if (role != null) {
                roles.put(task, role);
            } else {
                roles.remove(task);
                credit.remove(task);
            }
        }
    }

    Role role(Task task) {
        return roles.get(task);
    }

    /** Records behind the changelog's end. */
    long lag(Task task) {
        return Math.max(0, store.end(task) - store.checkpoint(task));
    }

    /** The lag rows to report: the learners and standbys of {@code assignment}. */
    List<Lag> lags(Assignment assignment) {
        SortedSet<Task> tasks = new TreeSet<>(assignment.learner());
        tasks.addAll(assignment.standby());
        List<Lag> lags = new ArrayList<>();
        tasks.forEach(task -> lags.add(new Lag(task, lag(task))));
        return lags;
    }

    /**
     * Advances every task by {@code elapsedMs}: an active task restores what it
     * lacks, then processes if {@code mayProcess} allows it (the member's lease);
     * a warming one replays.
     */
    void tick(long elapsedMs, Predicate<Task> mayProcess) {
        double seconds = elapsedMs / 1000.0;
        for (Map.Entry<Task, Role> entry : new ArrayList<>(roles.entrySet())) {
            Task task = entry.getKey();
            long end = store.end(task);
            long checkpoint = store.checkpoint(task);
            if (checkpoint < end) {
                long n = takeCredit(task, replayPerS * seconds);
                if (n > 0) {
                    store.setCheckpoint(task, Math.min(checkpoint + n, end));
                }
            } else if (entry.getValue() == Role.ACTIVE && mayProcess.test(task)) {
                long n = takeCredit(task, processPerS * seconds);
                if (n > 0) {
                    store.setEnd(task, end + n);
                    store.setCheckpoint(task, end + n);
                }
            }
        }
    }

    private long takeCredit(Task task, double budget) {
        double total = credit.getOrDefault(task, 0.0) + budget;
        double whole = Math.floor(total);
        credit.put(task, total - whole);
        return (long) whole;
    }
}
