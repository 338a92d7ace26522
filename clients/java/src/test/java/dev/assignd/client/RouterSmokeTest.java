package dev.assignd.client;

import static dev.assignd.client.MemberSmokeTest.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The router against the real binary ({@code ASSIGND_BIN}; skipped without it):
 * a group with a reader token, a member publishing its endpoint, a router
 * reading the owner of a key; a second member joins, the router is told, and
 * once the group is stable every partition's owner is one of the two
 * endpoints. The admin token reads routes too; a wrong token is refused 403; a
 * quiet watch's answer says how long it waited, and the bound counts it.
 */
class RouterSmokeTest {

    private static final String READER_TOKEN = "reader-reader-reader-1";
    private static final Map<String, String> ENDPOINTS = Map.of("a", "http://10.0.0.1:8080", "b",
            "http://10.0.0.2:8080");
    private static final Duration READY = Duration.ofSeconds(10);

    @Test
    void aRouterResolvesKeysToTheMembersEndpointsAndFollowsAJoin() throws Exception {
        try (RealHost host = new RealHost()) {
            host.createGroup("{\"topics\": [{\"name\": \"orders\", \"partitions\": 4}], \"learners\": \"off\","
                    + " \"heartbeat_interval_ms\": 200, \"expansion_timeout_ms\": 200, \"reader_token\": \""
                    + READER_TOKEN + "\"}");
            LinkedBlockingQueue<RouteTable> changes = new LinkedBlockingQueue<>();
            try (Router router = start(host, READER_TOKEN, changes::add); Member a = join(host, "a")) {
                waitFor("a owns customer-42", () -> owner(router, "customer-42").isPresent());
                RouteMember owner = owner(router, "customer-42").orElseThrow();
                assertEquals(Optional.of(ENDPOINTS.get("a")), owner.endpoint());
                assertEquals(Optional.of("a"), owner.memberName());
                assertEquals(Map.of("zone", "a"), owner.metadata());
                changes.clear();
                try (Member b = join(host, "b")) {
                    assertNotNull(changes.poll(30, TimeUnit.SECONDS), "the router was not told of b's join");
                    waitFor("every partition's owner is a or b, and both own some", () -> {
                        Set<String> endpoints = new HashSet<>();
                        for (int p = 0; p < 4; p++) {
                            Optional<String> endpoint = route(router, p).flatMap(Route::endpoint);
                            if (endpoint.isEmpty()) {
                                return false;
                            }
                            endpoints.add(endpoint.get());
                        }
                        return endpoints.equals(Set.copyOf(ENDPOINTS.values()));
                    });
                    checkLookupsAgree(host, router);
                    try (Router admin = start(host, RealHost.ADMIN_TOKEN, table -> {
                    })) {
                        assertTrue(admin.table().orElseThrow().epoch() >= 1);
                    }
                    try (Router wrong = Router.start(RouterConfig.of(host.base(), "g")
                            .withToken("not-the-reader-token"))) {
                        RouterRefusedException refused = assertThrows(RouterRefusedException.class,
                                () -> wrong.ready(READY));
                        assertEquals(403, refused.status());
                    }
                    checkAQuietWatchRenewsTheBound(router);
                    assertEquals(StopReason.LEFT, b.leave().get(10, TimeUnit.SECONDS));
                }
                assertEquals(StopReason.LEFT, a.leave().get(10, TimeUnit.SECONDS));
            }
        }
    }

    /**
     * A quiet watch runs out after half the host's default promise, and its answer says how long it waited: the
     * table's bound counts from the send time plus that wait.
     */
    private static void checkAQuietWatchRenewsTheBound(Router router) throws InterruptedException {
        waitFor("a watch says how long it waited", () -> !router.table().orElseThrow().waited().isZero());
        RouteTable renewed = router.table().orElseThrow();
        assertEquals(Duration.ofSeconds(2), renewed.valid(), "the host's default promise");
        assertEquals(renewed.waited().plus(renewed.valid()).toNanos(),
                renewed.freshUntilNanos() - renewed.sentAtNanos());
    }

    /** The host's {@code /routes/lookup} and the router put keys on the same partitions. */
    private static void checkLookupsAgree(RealHost host, Router router) throws Exception {
        HttpClient http = HttpClient.newHttpClient();
        for (int n = 0; n < 20; n++) {
            String key = "key-" + n;
            HttpResponse<String> answer = http.send(HttpRequest.newBuilder(URI.create(host.base()
                    + "/v1/groups/g/routes/lookup?topic=orders&key=" + URLEncoder.encode(key, StandardCharsets.UTF_8)))
                    .header("Authorization", "Bearer " + READER_TOKEN).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            int partition = new ObjectMapper().readTree(answer.body()).get("partition").intValue();
            assertEquals(partition, router.ownerOf("orders", key).partition(), key);
        }
    }

    private static Router start(RealHost host, String token, java.util.function.Consumer<RouteTable> onChange)
            throws Exception {
        Router router = Router.start(RouterConfig.of(host.base(), "g").withToken(token)
                .withWaitTime(Duration.ofSeconds(2)), onChange);
        router.ready(READY);
        return router;
    }

    private static Member join(RealHost host, String name) {
        return Member.start(MemberConfig.of(host.base(), "g", List.of("orders")).withName(name)
                .withEndpoint(ENDPOINTS.get(name)).withMetadata("zone", name), new MemberSmokeTest.Held());
    }

    private static Optional<RouteMember> owner(Router router, String key) {
        try {
            return router.ownerOf("orders", key).owner();
        } catch (RouteNotFoundException e) {
            return Optional.empty();
        }
    }

    private static Optional<Route> route(Router router, int partition) {
        try {
            return Optional.of(router.ownerOfPartition("orders", partition));
        } catch (RouteNotFoundException e) {
            return Optional.empty();
        }
    }
}
