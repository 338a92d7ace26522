package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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

    /** The server wants 16 bytes at least. */
    private static final String ADMIN_TOKEN = "t0k-smoke-test-admin";

    private Process server;
    private String base;

    @BeforeEach
    void startServer() throws Exception {
        String bin = System.getenv("ASSIGND_BIN");
        assumeTrue(bin != null && !bin.isEmpty(), "ASSIGND_BIN is not set");
        Path dir = Files.createTempDirectory("assignd-java-smoke");
        ProcessBuilder serve = new ProcessBuilder(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                dir.resolve("data").toString())
                .redirectError(dir.resolve("server.stderr").toFile());
        serve.environment().put("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN);
        server = serve.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
        String first = out.readLine();
        assertTrue(first != null && first.startsWith("listening on "), "the server said " + first);
        base = first.substring("listening on ".length()).trim();
        String config = "{\"topics\": [{\"name\": \"orders\", \"partitions\": 4}], \"heartbeat_interval_ms\": 200, \"expansion_timeout_ms\": 500}";
        HttpResponse<String> created = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base
                + "/v1/groups/g")).header("Authorization", "Bearer " + ADMIN_TOKEN).header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(config)).build(), HttpResponse.BodyHandlers.ofString());
        assertTrue(created.statusCode() / 100 == 2, created.statusCode() + " " + created.body());
    }

    @AfterEach
    void stopServer() throws InterruptedException {
        if (server != null) {
            server.destroy();
            if (!server.waitFor(5, TimeUnit.SECONDS)) {
                server.destroyForcibly().waitFor();
            }
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

    private static void waitFor(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never: " + what);
            Thread.sleep(10);
        }
    }
}
