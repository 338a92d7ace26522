package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/** The router's loop against a local fake host. */
class RouterTest {

    private static final Duration READY = Duration.ofSeconds(10);

    @Test
    void theRouterWatchesAndIsToldOfAChange() throws Exception {
        try (FakeRoutes host = new FakeRoutes(5, "m-1")) {
            LinkedBlockingQueue<RouteTable> changes = new LinkedBlockingQueue<>();
            RouterConfig config = RouterConfig.of(host.base(), "g").withToken("reader-token-0123")
                    .withWaitTime(Duration.ofSeconds(5));
            try (Router router = Router.start(config, changes::add)) {
                router.ready(READY);
                Route route = router.ownerOf("orders", "customer-42");
                assertEquals(Optional.of("http://m-1:80"), route.endpoint());
                assertEquals(5, route.epoch());
                assertTrue(route.fresh());
                assertEquals(5, changes.take().epoch());
                waitFor("a watch", () -> host.seen.size() >= 2);
                host.set(6, "m-2");
                assertEquals(6, changes.poll(10, TimeUnit.SECONDS).epoch());
                assertEquals("m-2", router.ownerOfPartition("orders", 3).owner().orElseThrow().memberId());
                assertEquals("/v1/groups/g/routes", host.seen.get(0).uri().getPath());
                assertEquals(null, host.seen.get(0).uri().getQuery());
                assertEquals("after_epoch=5&wait_ms=5000", host.seen.get(1).uri().getQuery());
                host.seen.forEach(seen -> assertEquals("Bearer reader-token-0123", seen.authorization()));
            }
        }
    }

    @Test
    void a503WithRetryAfterIsWaitedOutThenTheRouterRecovers() throws Exception {
        try (FakeRoutes host = new FakeRoutes(1, "m-1")) {
            host.scripted.put(0, FakeHost.Reply.error(503, "too_many_watchers").withHeader("Retry-After", "1"));
            try (Router router = Router.start(RouterConfig.of(host.base(), "g"))) {
                router.ready(READY);
                long gapNanos = host.seen.get(1).atNanos() - host.seen.get(0).atNanos();
                // A lower bound only: the router may not ask again before the
                // host's Retry-After, however slow the machine.
                assertTrue(gapNanos >= Duration.ofMillis(950).toNanos(), "asked again after " + gapNanos + " ns");
            }
        }
    }

    @Test
    void theRouterFailsOverToTheNextUrl() throws Exception {
        try (FakeRoutes host = new FakeRoutes(3, "m-1");
                Router router = Router.start(RouterConfig.of(FakeHost.refusing() + "," + host.base(), "g"))) {
            router.ready(READY);
            assertEquals(3, router.table().orElseThrow().epoch());
        }
    }

    @Test
    void aRefusalFailsReady() throws Exception {
        try (FakeRoutes host = new FakeRoutes(1, "m-1")) {
            for (int n = 0; n < 3; n++) {
                host.scripted.put(n, FakeHost.Reply.error(403, "forbidden"));
            }
            try (Router router = Router.start(RouterConfig.of(host.base(), "g").withToken("wrong-token-0123"))) {
                RouterRefusedException refused = assertThrows(RouterRefusedException.class, () -> router.ready(READY));
                assertEquals(403, refused.status());
                assertEquals("forbidden", refused.code());
                assertEquals(RouteNotFoundException.Reason.NO_TABLE,
                        assertThrows(RouteNotFoundException.class, () -> router.ownerOf("orders", "k")).reason());
            }
        }
    }

    @Test
    void aRedirectIsFollowedWithTheToken() throws Exception {
        try (FakeRoutes host = new FakeRoutes(2, "m-1")) {
            HttpServer node = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            node.createContext("/", exchange -> {
                exchange.getResponseHeaders().add("Location", host.base() + exchange.getRequestURI());
                exchange.sendResponseHeaders(307, -1);
                exchange.close();
            });
            node.start();
            String base = "http://127.0.0.1:" + node.getAddress().getPort();
            try (Router router = Router.start(RouterConfig.of(base, "g").withToken("reader-token-0123"))) {
                router.ready(READY);
                assertEquals("Bearer reader-token-0123", host.seen.get(0).authorization());
            } finally {
                node.stop(0);
            }
        }
    }

    @Test
    void aMisrouteAsksForANewerTableAtOnce() throws Exception {
        try (FakeRoutes host = new FakeRoutes(7, "m-1");
                Router router = Router.start(RouterConfig.of(host.base(), "g"))) {
            router.ready(READY);
            waitFor("a watch", () -> host.seen.size() >= 2);
            Route route = router.ownerOf("orders", "k");
            router.misrouted(route);
            waitFor("a plain query", () -> host.seen.size() >= 3);
            assertEquals(null, host.seen.get(2).uri().getQuery());
            router.misrouted(new Route("orders", 0, Optional.empty(), Optional.empty(), java.util.List.of(),
                    java.util.List.of(), 6, false));
            assertEquals(2, router.misroutes());
        }
    }

    @Test
    void aLowerEpochAnsweringAWatchReplacesTheTable() throws Exception {
        try (FakeRoutes host = new FakeRoutes(9, "m-1");
                Router router = Router.start(RouterConfig.of(host.base(), "g"))) {
            router.ready(READY);
            waitFor("a watch", () -> host.seen.size() >= 2);
            host.set(4, "m-2");
            waitFor("the lower table", () -> router.table().orElseThrow().epoch() == 4);
            assertFalse(router.table().orElseThrow().age().isNegative());
        }
    }

    @Test
    void theSameEpochAgainMovesTheBoundOn() throws Exception {
        try (FakeRoutes host = new FakeRoutes(3, "m-1")) {
            LinkedBlockingQueue<RouteTable> changes = new LinkedBlockingQueue<>();
            try (Router router = Router.start(RouterConfig.of(host.base(), "g"), changes::add)) {
                router.ready(READY);
                RouteTable held = router.table().orElseThrow();
                long later = held.sentAtNanos() + Duration.ofSeconds(5).toNanos();
                router.offer(held.renewed(later, 0), 3L);
                assertEquals(later, router.table().orElseThrow().sentAtNanos());
                router.offer(held, null);
                assertEquals(later, router.table().orElseThrow().sentAtNanos(), "an older answer moved the bound back");
                // Sent later but read sooner (it waited less) moves nothing; read later, it moves the bound on.
                long second = Duration.ofSeconds(1).toNanos();
                router.offer(held.renewed(later - second, second / 2), null);
                assertEquals(later, router.table().orElseThrow().sentAtNanos());
                router.offer(held.renewed(later, 2 * second), null);
                assertEquals(Duration.ofSeconds(2), router.table().orElseThrow().waited());
                assertEquals(1, changes.size());
            }
        }
    }

    @Test
    void theBoundCountsFromTheSendTimePlusTheWaitTheHostReports() throws Exception {
        for (String header : new String[] {"1500", null, "soon"}) {
            long boundMs = "1500".equals(header) ? 3500 : 2000;
            try (FakeRoutes host = new FakeRoutes(1, "m-1")) {
                host.validMs = 2000;
                host.waitedMs = header; // answered at once, but read 1.5 s after it came, says the host
                try (Router router = Router.start(RouterConfig.of(host.base(), "g"))) {
                    router.ready(READY);
                    RouteTable held = router.table().orElseThrow();
                    long bound = Duration.ofMillis(boundMs).toNanos();
                    assertEquals(bound, held.freshUntilNanos() - held.sentAtNanos(), "waited " + header);
                    assertTrue(held.freshAt(held.sentAtNanos() + bound - 1));
                    assertFalse(held.freshAt(held.sentAtNanos() + bound));
                }
            }
        }
    }

    @Test
    void aWatchWaitsAtMostHalfThePromise() throws Exception {
        try (FakeRoutes host = new FakeRoutes(1, "m-1")) {
            host.validMs = 2000;
            try (Router router = Router.start(RouterConfig.of(host.base(), "g"))) {
                router.ready(READY);
                waitFor("a watch", () -> host.seen.size() >= 2);
                assertEquals("after_epoch=1&wait_ms=1000", host.seen.get(1).uri().getQuery());
                host.validMs = 0; // no promise: the configured wait
                host.set(2, "m-1");
                waitFor("a watch past epoch 2",
                        () -> host.seen.stream().anyMatch(s -> "after_epoch=2&wait_ms=20000".equals(s.uri().getQuery())));
            }
        }
        try (FakeRoutes host = new FakeRoutes(1, "m-1")) {
            host.validMs = 2000;
            try (Router router = Router.start(RouterConfig.of(host.base(), "g").withWaitTime(Duration.ofMillis(300)))) {
                router.ready(READY);
                waitFor("a watch", () -> host.seen.size() >= 2);
                assertEquals("after_epoch=1&wait_ms=300", host.seen.get(1).uri().getQuery());
            }
        }
    }

    private static void waitFor(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never: " + what);
            Thread.sleep(10);
        }
    }
}
