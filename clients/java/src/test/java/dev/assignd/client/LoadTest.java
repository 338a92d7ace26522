package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A member's load reports: sent once the host asks, refused past the host's bounds. */
class LoadTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static MemberConfig config(String url) {
        return MemberConfig.of(url, "g", List.of("orders")).withRequestTimeout(Duration.ofSeconds(2));
    }

    @Test
    void aLoadConfigTheHostWouldRefuseIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> config("http://h:1").withLoadCapacity(0).check());
        assertThrows(IllegalArgumentException.class, () -> config("http://h:1").withLoadThreshold(-1).check());
        config("http://h:1").withLoadCapacity(500).withLoadThreshold(0.2).check();
    }

    @Test
    void loadsGoOnceTheHostAsksWithTheLoadCapacity() throws Exception {
        String answer = "{\"member_id\": \"m-1\", \"member_epoch\": 1, \"heartbeat_interval_ms\": 20,"
                + " \"active\": [[\"orders\", 0, 2]], \"lease_ms\": 3000%s}";
        try (FakeHost host = new FakeHost(n -> FakeHost.Reply.json(200,
                String.format(answer, n == 0 ? "" : ", \"load_report\": \"full\"")))) {
            Member member = Member.start(config(host.base()).withLoadCapacity(300), new MemberSmokeTest.Held());
            waitFor(() -> member.assignment().active().size() == 3);
            assertThrows(IllegalArgumentException.class,
                    () -> member.reportLoad(Map.of(new Task("orders", 0), Double.NaN)));
            assertThrows(IllegalArgumentException.class, () -> member.reportLoad(Map.of(), 11.0, null));
            member.reportLoad(Map.of(new Task("orders", 0), 7.0, new Task("orders", 1), 7.0,
                    new Task("orders", 2), 2.5), 0.25, null);
            JsonNode sent = null;
            for (int i = 0; sent == null; i++) {
                int at = i;
                waitFor(() -> host.seen.size() > at);
                JsonNode body = MAPPER.readTree(host.seen.get(at).body());
                if (body.path("loads").size() == 2) {
                    sent = body;
                }
            }
            assertEquals(MAPPER.readTree("[[\"orders\", 0, 1, 7.0], [\"orders\", 2, 2.5]]"), sent.get("loads"));
            assertEquals(0.25, sent.get("utilisation").doubleValue());
            assertEquals(300.0, sent.get("load_capacity").doubleValue());
            assertEquals(StopReason.LEFT, member.leave().get(5, TimeUnit.SECONDS));
        }
    }

    private static void waitFor(java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out");
            Thread.sleep(5);
        }
    }
}
