package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A member's endpoint and metadata: the host's limits, and what its heartbeats carry. */
class EndpointTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static MemberConfig config(String url) {
        return MemberConfig.of(url, "g", List.of("orders")).withRequestTimeout(Duration.ofSeconds(2));
    }

    @Test
    void endpointsPastTheHostsLimitsAreRefused() {
        config("http://h:1").withEndpoint("http://10.0.0.5:8080").withMetadata("zone", "a")
                .withMetadata("version", "").check();
        config("http://h:1").check();
        Map<String, String> tooMany = new HashMap<>();
        for (int n = 0; n <= MemberConfig.METADATA_PAIRS_MAX; n++) {
            tooMany.put("k" + n, "v");
        }
        List<Runnable> refused = List.of(
                () -> config("http://h:1").withEndpoint("").check(),
                () -> config("http://h:1").withEndpoint("http://a b").check(),
                () -> config("http://h:1").withEndpoint("x".repeat(MemberConfig.ENDPOINT_BYTES_MAX + 1)).check(),
                () -> config("http://h:1").withMetadata("", "v").check(),
                () -> config("http://h:1").withMetadata("k".repeat(MemberConfig.METADATA_KEY_BYTES_MAX + 1), "v")
                        .check(),
                () -> config("http://h:1").withMetadata("k", "v".repeat(MemberConfig.METADATA_VALUE_BYTES_MAX + 1))
                        .check(),
                () -> config("http://h:1").withMetadata("k", "line\nbreak").check(),
                () -> MemberConfig.checkEndpoint(null, tooMany));
        refused.forEach(check -> assertThrows(IllegalArgumentException.class, check::run));
    }

    @Test
    void aMemberPublishesItsEndpointOnJoinAndAChangeOnTheNextHeartbeat() throws Exception {
        String answer = "{\"member_id\": \"m-1\", \"member_epoch\": 1, \"heartbeat_interval_ms\": 20,"
                + " \"active\": [[\"orders\", 0]], \"lease_ms\": 3000}";
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.json(200, answer))) {
            Member member = Member.start(config(host.base()).withEndpoint("http://10.0.0.5:8080")
                    .withMetadata("zone", "a"), new MemberSmokeTest.Held());
            waitFor(() -> host.seen.size() >= 2);
            JsonNode join = body(host, 0);
            assertEquals("http://10.0.0.5:8080", join.get("endpoint").textValue());
            assertEquals(MAPPER.readTree("{\"zone\": \"a\"}"), join.get("metadata"));
            assertFalse(body(host, 1).has("endpoint"), "a heartbeat carried the unchanged endpoint");
            assertThrows(IllegalArgumentException.class, () -> member.setEndpoint("http://a b", Map.of()));
            int before = host.seen.size();
            member.setEndpoint(null, Map.of());
            // The request in flight, if any, was built before the change.
            JsonNode change = null;
            for (int i = before; change == null; i++) {
                int at = i;
                waitFor(() -> host.seen.size() > at);
                if (body(host, at).has("endpoint")) {
                    change = body(host, at);
                }
            }
            assertEquals("", change.get("endpoint").textValue());
            assertEquals(MAPPER.readTree("{}"), change.get("metadata"));
            assertEquals(StopReason.LEFT, member.leave().get(5, TimeUnit.SECONDS));
            assertFalse(body(host, host.seen.size() - 1).has("endpoint"), "the leave carried the endpoint");
        }
    }

    private static JsonNode body(FakeHost host, int i) throws Exception {
        return MAPPER.readTree(host.seen.get(i).body());
    }

    private static void waitFor(java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out");
            Thread.sleep(5);
        }
    }
}
