package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The member shell against a scripted host: events in order, the ack after the listener, the leave. */
class MemberTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final Task T0 = Task.of("orders", 0);
    private static final Task T1 = Task.of("orders", 1);

    /** Gives 0 and 1, then asks for 1 back until a heartbeat no longer reports it owned. */
    private static FakeHost.Reply script(int n, String body) {
        JsonNode request;
        try {
            request = MAPPER.readTree(body);
        } catch (java.io.IOException e) {
            throw new UncheckedIOException(e);
        }
        long epoch = request.get("member_epoch").longValue();
        String owned = request.get("owned").toString();
        String lists;
        if (epoch == -1) {
            lists = "\"active\": []";
        } else if (epoch == 0) {
            lists = "\"active\": [[\"orders\", 0, 1]]";
        } else if (owned.contains("[\"orders\",0,1]")) {
            lists = "\"active\": [[\"orders\", 0]], \"revoking\": [[\"orders\", 1]]";
        } else {
            lists = "\"active\": [[\"orders\", 0]]";
        }
        return FakeHost.Reply.json(200, "{\"member_id\": \"m-1\", \"member_epoch\": " + (epoch == 0 ? 1 : 2)
                + ", \"heartbeat_interval_ms\": 50, \"lease_ms\": 5000, " + lists + "}");
    }

    @Test
    void aRevocationIsAcknowledgedOnceTheListenerReturnsAndALeaveEndsIt() throws Exception {
        List<String> heard = new CopyOnWriteArrayList<>();
        try (FakeHost host = new FakeHost(MemberTest::script)) {
            Member[] member = new Member[1];
            RebalanceListener listener = new RebalanceListener() {
                @Override
                public void onJoined(String memberId) {
                    heard.add("joined " + memberId);
                }

                @Override
                public void onTasksAssigned(Collection<Task> tasks) {
                    heard.add("assigned " + tasks + " " + tasks.stream().allMatch(member[0]::mayProcess));
                }

                @Override
                public void onTasksRevoked(Collection<Task> tasks) {
                    // Still held (and reported owned) until this returns.
                    heard.add("revoked " + tasks + " " + member[0].mayProcess(T1));
                }

                @Override
                public void onTasksLost(Collection<Task> tasks) {
                    // Given up as the leave was sent: no longer to be processed.
                    heard.add("lost " + tasks + " " + member[0].mayProcess(T0));
                }
            };
            member[0] = Member.start(MemberConfig.of(host.base(), "g", List.of("orders"))
                    .withRequestTimeout(Duration.ofSeconds(2)), listener);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (host.seen.stream().noneMatch(s -> s.body().contains("\"owned\":[[\"orders\",0]]"))) {
                assertTrue(System.nanoTime() < deadline, "never released 1: " + heard);
                Thread.sleep(10);
            }
            assertEquals(List.of(T0), List.copyOf(member[0].assignment().active()));
            assertTrue(member[0].assignment().revoking().isEmpty());
            assertTrue(member[0].mayProcess(T0));
            assertEquals(2, member[0].memberEpoch());
            assertEquals(StopReason.LEFT, member[0].leave().get(5, TimeUnit.SECONDS));
            assertTrue(!member[0].mayProcess(T0), "nothing may be processed after a leave");
            List<FakeHost.Seen> seen = host.seen;
            assertTrue(seen.get(seen.size() - 1).body().contains("\"member_epoch\":-1"), seen.toString());
        }
        assertEquals(List.of("joined m-1", "assigned [orders/0, orders/1] true", "revoked [orders/1] true",
                "lost [orders/0] false"), heard);
    }

    @Test
    void aMemberThatNeverJoinedStopsAtOnceWhenItLeaves() throws Exception {
        Member member = Member.start(MemberConfig.of(FakeHost.refusing(), "g", List.of("orders")),
                new MemberSmokeTest.Held());
        assertEquals(StopReason.LEFT, member.leave().get(5, TimeUnit.SECONDS));
    }
}
