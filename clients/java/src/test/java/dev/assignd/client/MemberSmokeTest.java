package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Two members against the real binary ({@code ASSIGND_BIN}; skipped without
 * it): the first takes all four tasks, the second warms half of them up and
 * takes them, and no task is ever active on both.
 */
class MemberSmokeTest {

    private static final List<Task> ALL = List.of(Task.of("orders", 0), Task.of("orders", 1), Task.of("orders", 2),
            Task.of("orders", 3));

    private RealHost host;
    private String base;

    @BeforeEach
    void startServer() throws Exception {
        host = new RealHost();
        base = host.base();
        host.createGroup("{\"topics\": [{\"name\": \"orders\", \"partitions\": 4}], \"heartbeat_interval_ms\": 200,"
                + " \"expansion_timeout_ms\": 500}");
    }

    @AfterEach
    void stopServer() throws InterruptedException {
        if (host != null) {
            host.close();
        }
    }

    /** Keeps the tasks a member's listener was told it holds. */
    static final class Held implements RebalanceListener {
        final Set<Task> active = new ConcurrentSkipListSet<>();

        @Override
        public void onTasksAssigned(Collection<Task> tasks) {
            active.addAll(tasks);
        }

        @Override
        public void onTasksRevoked(Collection<Task> tasks) {
            active.removeAll(tasks);
        }
    }

    /** Reports every learner and standby caught up, so warm-ups end at once. */
    private static final LagSource WARM = assignment -> {
        List<Lag> lags = new ArrayList<>();
        assignment.learner().forEach(task -> lags.add(new Lag(task, 0)));
        assignment.standby().forEach(task -> lags.add(new Lag(task, 0)));
        return lags;
    };

    @Test
    void twoMembersSplitTheTasksWithoutOverlap() throws Exception {
        MemberConfig config = MemberConfig.of(base, "g", List.of("orders"));
        Held firstHeld = new Held();
        try (Member first = Member.start(config.withName("a"), firstHeld, WARM)) {
            waitFor("the first member holds every task", () -> firstHeld.active.size() == 4
                    && ALL.stream().allMatch(first::mayProcess));
            assertTrue(first.memberEpoch() > 0);
            Held secondHeld = new Held();
            try (Member second = Member.start(config, secondHeld, WARM)) {
                waitFor("the tasks are split 2/2", () -> {
                    // The new owner first: a task it holds that the old owner
                    // still holds afterwards was held by both at once.
                    SortedSet<Task> gained = new TreeSet<>(secondHeld.active);
                    SortedSet<Task> kept = new TreeSet<>(firstHeld.active);
                    gained.retainAll(kept);
                    assertTrue(gained.isEmpty(), "active on both members: " + gained);
                    return secondHeld.active.size() == 2 && firstHeld.active.size() == 2
                            && ALL.stream().allMatch(t -> first.mayProcess(t) ^ second.mayProcess(t));
                });
                assertEquals(StopReason.LEFT, second.leave().get(10, TimeUnit.SECONDS));
            }
            assertEquals(StopReason.LEFT, first.leave().get(10, TimeUnit.SECONDS));
            assertTrue(ALL.stream().noneMatch(first::mayProcess));
        }
    }

    static void waitFor(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never: " + what);
            Thread.sleep(10);
        }
    }
}
