package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The transport's redirects, bootstrap URLs, retries and failure classes, against local fake hosts. */
class TransportTest {

    private static final HeartbeatRequest REQUEST = new HeartbeatRequest("m-1", null, 1, null, null, 1,
            List.of(Task.of("orders", 0)), List.of(), false, true);

    private static Transport transport(String urls) {
        return new Transport(urls, "g", null, Duration.ofMillis(800));
    }

    private static Failure failure(Transport transport) {
        return assertThrows(HeartbeatFailedException.class, () -> transport.heartbeat(REQUEST)).failure();
    }

    @Test
    void anAnswerIsReadAndTheMemberTokenSent() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.json(200, FakeHost.ANSWER))) {
            Transport transport = new Transport(host.base() + "/", "g", "s3cret", Duration.ofSeconds(2));
            HeartbeatResponse answer = transport.heartbeat(REQUEST);
            assertEquals(3, answer.active().size());
            assertEquals(Long.valueOf(3000), answer.leaseMs());
            FakeHost.Seen seen = host.seen.get(0);
            assertEquals("/v1/groups/g/heartbeat", seen.path());
            assertEquals("Bearer s3cret", seen.authorization());
            assertTrue(seen.body().contains("\"task_ranges\":true"), seen.body());
        }
    }

    @Test
    void aRedirectIsFollowedAndTheCoordinatorRemembered() throws Exception {
        try (FakeHost coordinator = new FakeHost(n -> FakeHost.Reply.json(200, FakeHost.ANSWER));
                FakeHost other = new FakeHost(n -> new FakeHost.Reply(307,
                        java.util.Map.of("Location", coordinator.base() + "/v1/groups/g/heartbeat"), "", 0))) {
            Transport transport = transport(other.base());
            transport.heartbeat(REQUEST);
            transport.heartbeat(REQUEST);
            assertEquals(1, other.seen.size(), "the second heartbeat goes to the coordinator directly");
            assertEquals(2, coordinator.seen.size());
        }
    }

    @Test
    void aRelativeRedirectResolvesAgainstTheRequest() throws Exception {
        try (FakeHost host = new FakeHost(n -> n == 0
                ? new FakeHost.Reply(308, java.util.Map.of("Location", "/elsewhere/heartbeat"), "", 0)
                : FakeHost.Reply.json(200, FakeHost.ANSWER))) {
            transport(host.base()).heartbeat(REQUEST);
            assertEquals("/elsewhere/heartbeat", host.seen.get(1).path());
        }
    }

    @Test
    void redirectsOnlyAreUnreachedAfterFiveHops() throws Exception {
        AtomicReference<String> self = new AtomicReference<>();
        try (FakeHost host = new FakeHost(n -> new FakeHost.Reply(307,
                java.util.Map.of("Location", self.get() + "/v1/groups/g/heartbeat"), "", 0))) {
            self.set(host.base());
            Failure failure = failure(transport(host.base()));
            assertInstanceOf(Failure.Unreached.class, failure, failure.message());
            assertEquals(1 + Transport.REDIRECTS_MAX, host.seen.size());
        }
    }

    @Test
    void aRefusedConnectionTriesTheNextBootstrapUrl() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.json(200, FakeHost.ANSWER))) {
            Transport transport = transport(FakeHost.refusing() + "," + host.base());
            assertEquals("m-1", transport.heartbeat(REQUEST).memberId());
        }
    }

    @Test
    void everyBootstrapUrlRefusedIsUnreached() throws Exception {
        Failure failure = failure(transport(FakeHost.refusing() + ", " + FakeHost.refusing()));
        assertInstanceOf(Failure.Unreached.class, failure, failure.message());
    }

    /**
     * A coordinator that died between two heartbeats (its kept-alive connection
     * closed, then refused) reached nobody: with the other node between owners,
     * the heartbeat is unreached, not lost on a dead connection.
     */
    @Test
    void aCoordinatorThatDiedBetweenHeartbeatsIsUnreached() throws Exception {
        try (FakeHost survivor = new FakeHost(n -> FakeHost.Reply.error(503, "shard_unavailable"))) {
            FakeHost coordinator = new FakeHost(n -> FakeHost.Reply.json(200, FakeHost.ANSWER));
            Transport transport = transport(coordinator.base() + "," + survivor.base());
            transport.heartbeat(REQUEST);
            coordinator.close();
            Thread.sleep(100);
            Failure failure = failure(transport);
            assertInstanceOf(Failure.Unreached.class, failure, failure.message());
        }
    }

    @Test
    void aShardBetweenOwnersIsRetriedWithinTheRequestTimeout() throws Exception {
        try (FakeHost host = new FakeHost(n -> n < 3
                ? FakeHost.Reply.error(503, "shard_unavailable")
                : FakeHost.Reply.json(200, FakeHost.ANSWER))) {
            assertEquals("m-1", transport(host.base()).heartbeat(REQUEST).memberId());
            assertEquals(4, host.seen.size());
        }
    }

    @Test
    void aShardThatStaysUnavailableIsUnreached() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.error(503, "shard_unavailable"))) {
            Failure failure = failure(transport(host.base()));
            assertInstanceOf(Failure.Unreached.class, failure, failure.message());
            assertTrue(host.seen.size() >= 3, "retried: " + host.seen.size());
        }
    }

    @Test
    void anUnreachableCoordinatorMayHaveBeenReached() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.error(503, "coordinator_unreachable"))) {
            Failure failure = failure(transport(host.base()));
            assertEquals(new Failure.Server(503, null, "coordinator_unreachable here"), failure);
        }
    }

    @Test
    void aRefusalCarriesItsStatusAndCode() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.error(409, "fenced"))) {
            assertEquals(new Failure.Refused(409, "fenced", null, "fenced here"), failure(transport(host.base())));
        }
    }

    @Test
    void retryAfterIsReadInSecondsAndCappedAtAMinute() throws Exception {
        try (FakeHost host = new FakeHost(n -> n == 0
                ? FakeHost.Reply.error(429, "join_rate_limited").withHeader("Retry-After", "7")
                : FakeHost.Reply.json(503, "busy").withHeader("Retry-After", "3600"))) {
            Transport transport = transport(host.base());
            assertEquals(Long.valueOf(7000), failure(transport).retryAfterMs());
            Failure capped = failure(transport);
            assertEquals(new Failure.Server(503, 60_000L, "busy"), capped);
        }
    }

    @Test
    void aTimeoutIsNoAnswer() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.json(200, FakeHost.ANSWER).after(3000))) {
            long started = System.nanoTime();
            assertInstanceOf(Failure.NoAnswer.class, failure(transport(host.base())));
            long tookMs = (System.nanoTime() - started) / 1_000_000;
            assertTrue(tookMs < 2000, "took " + tookMs + " ms");
        }
    }

    @Test
    void aConnectionClosedAfterSendingIsNoAnswer() throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 10, InetAddress.getLoopbackAddress())) {
            Thread closer = new Thread(() -> {
                try (Socket client = socket.accept(); InputStream in = client.getInputStream()) {
                    in.read(new byte[512]);
                } catch (IOException e) {
                    // The test sees the outcome on the client's side.
                }
            });
            closer.start();
            Failure failure = failure(transport("http://127.0.0.1:" + socket.getLocalPort()));
            assertInstanceOf(Failure.NoAnswer.class, failure, failure.message());
            closer.join();
        }
    }

    @Test
    void answersThatDoNotReadAreUnreadable() throws Exception {
        try (FakeHost host = new FakeHost(n -> n == 0
                ? FakeHost.Reply.json(200, "{\"member_id\": 7}")
                : new FakeHost.Reply(404, java.util.Map.of(), "no such page", 0))) {
            Transport transport = transport(host.base());
            assertInstanceOf(Failure.Unreadable.class, failure(transport));
            Failure notFound = failure(transport);
            assertInstanceOf(Failure.Unreadable.class, notFound);
            assertTrue(notFound.message().contains("404"), notFound.message());
        }
    }

    @Test
    void aServerFailureWithoutACodeIsServer() throws Exception {
        try (FakeHost host = new FakeHost(n -> new FakeHost.Reply(500, java.util.Map.of(), "", 0))) {
            assertEquals(new Failure.Server(500, null, ""), failure(transport(host.base())));
        }
    }

    @Test
    void notCoordinatorIsARefusalWhateverTheStatus() throws Exception {
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.error(503, "not_coordinator"))) {
            assertEquals(new Failure.Refused(503, "not_coordinator", null, "not_coordinator here"),
                    failure(transport(host.base())));
        }
    }
}
