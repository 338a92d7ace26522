package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** Task ranges both ways, the request and answer bodies, the error body, task order. */
class WireTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** {@code text} with ' for ", normalized as the vectors compare JSON. */
    private static JsonNode json(String text) throws Exception {
        return VectorJson.normalized(MAPPER.readTree(text.replace('\'', '"')));
    }

    @Test
    void runsOfPartitionsAreWrittenAsRangesAndLoneTasksAsPairs() throws Exception {
        List<Task> tasks = List.of(Task.of("a", 0), Task.of("a", 1), Task.of("a", 2), Task.of("a", 5),
                Task.of("b", 6), Task.of("b", 7));
        assertEquals(json("[['a', 0, 2], ['a', 5], ['b', 6, 7]]"), VectorJson.normalized(TaskRanges.write(tasks)));
        assertEquals(json("[]"), TaskRanges.write(List.of()));
    }

    @Test
    void aMillionTasksFitInAFewBytes() {
        List<Task> tasks = new ArrayList<>();
        for (int t = 0; t < 10; t++) {
            for (int p = 0; p < 100_000; p++) {
                tasks.add(Task.of("topic-" + t, p));
            }
        }
        assertTrue(TaskRanges.write(tasks).toString().length() < 1_000);
    }

    @Test
    void pairsAndRangesReadAlike() throws Exception {
        List<Task> ranged = TaskRanges.read(json("[['orders', 0, 2], ['orders', 7]]"));
        List<Task> pairs = TaskRanges.read(json("[['orders', 0], ['orders', 1], ['orders', 2], ['orders', 7]]"));
        assertEquals(pairs, ranged);
        assertEquals(List.of(), TaskRanges.read(null));
        assertEquals(List.of(), TaskRanges.read(json("null")));
    }

    @Test
    void malformedListsAreRefused() throws Exception {
        for (String bad : List.of("[['orders', 3, 1]]", "[['orders']]", "[['orders', -1]]", "[[1, 2]]",
                "[['orders', 1, 2, 3]]", "{}", "[['orders', 0, 1000000]]", "[['orders', 1.5]]")) {
            assertThrows(WireException.class, () -> TaskRanges.read(json(bad)), bad);
        }
    }

    @Test
    void aRequestIsWrittenAsTheHostReadsIt() throws Exception {
        HeartbeatRequest join = new HeartbeatRequest("c-1", "w-a", 0, List.of("orders"), "r1", 2,
                List.of(Task.of("orders", 0), Task.of("orders", 1)),
                List.of(new Lag(Task.of("orders", 4), 12)), true, true);
        assertEquals(json("{'member_id': 'c-1', 'member_name': 'w-a', 'member_epoch': 0, 'topics': ['orders'],"
                + " 'rack': 'r1', 'capacity': 2, 'owned': [['orders', 0, 1]], 'lags': [['orders', 4, 12]],"
                + " 'drain': true, 'task_ranges': true}"), VectorJson.normalized(Wire.encode(join)));
        HeartbeatRequest beat = new HeartbeatRequest("m", null, 3, null, null, 1, List.of(), List.of(), false, true);
        assertEquals(json("{'member_id': 'm', 'member_epoch': 3, 'capacity': 1, 'owned': [], 'lags': [],"
                + " 'drain': false, 'task_ranges': true}"), VectorJson.normalized(Wire.encode(beat)));
    }

    @Test
    void anAnswerReadsLeniently() throws Exception {
        HeartbeatResponse full = Wire.decodeResponse(json("{'member_id': 'm', 'member_epoch': 4,"
                + " 'heartbeat_interval_ms': 3000, 'active': [['orders', 0, 2]], 'revoking': [['p', 1]],"
                + " 'learner': [], 'standby': [['orders', 9]], 'draining': true, 'drained': false,"
                + " 'lease_ms': 6000, 'unreached_lease_ms': 11000, 'unreached_flight_ms': 6000, 'extra': 1}"));
        assertEquals(4, full.memberEpoch());
        assertEquals(new TreeSet<>(List.of(Task.of("orders", 0), Task.of("orders", 1), Task.of("orders", 2))),
                full.active());
        assertEquals(Long.valueOf(11000), full.unreachedLeaseMs());
        assertTrue(full.draining());
        HeartbeatResponse older = Wire.decodeResponse(
                json("{'member_id': 'm', 'member_epoch': 1, 'heartbeat_interval_ms': 3000, 'lease_ms': null}"));
        assertTrue(older.active().isEmpty());
        assertNull(older.leaseMs());
        assertNull(older.unreachedFlightMs());
    }

    @Test
    void anAnswerWithoutItsRequiredFieldsIsRefused() {
        for (String bad : List.of("{'member_epoch': 1, 'heartbeat_interval_ms': 1}",
                "{'member_id': 'm', 'heartbeat_interval_ms': 1}",
                "{'member_id': 'm', 'member_epoch': -1, 'heartbeat_interval_ms': 1}",
                "{'member_id': 'm', 'member_epoch': 18446744073709551615, 'heartbeat_interval_ms': 1}",
                "[]")) {
            assertThrows(WireException.class, () -> Wire.decodeResponse(json(bad)), bad);
        }
        assertThrows(WireException.class, () -> Wire.decodeResponse("not json".getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void theErrorBodyReadsOrIsNone() {
        Wire.ErrorBody body = Wire.decodeError(
                "{\"error\": {\"code\": \"fenced\", \"message\": \"gone\"}}".getBytes(StandardCharsets.UTF_8));
        assertEquals(new Wire.ErrorBody("fenced", "gone"), body);
        assertNull(Wire.decodeError("oops".getBytes(StandardCharsets.UTF_8)));
        assertNull(Wire.decodeError("{\"error\": \"x\"}".getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void tasksSortByTopicInByteOrderThenPartition() {
        // U+FF5E sorts before U+1F600 in UTF-8 byte order, after it in UTF-16 units.
        List<Task> sorted = new ArrayList<>(new TreeSet<>(List.of(Task.of("\uD83D\uDE00", 0), Task.of("\uFF5E", 0),
                Task.of("b", 10), Task.of("b", 9), Task.of("a", 1))));
        assertEquals(List.of(Task.of("a", 1), Task.of("b", 9), Task.of("b", 10), Task.of("\uFF5E", 0),
                Task.of("\uD83D\uDE00", 0)), sorted);
    }

    @Test
    void heartbeatUrlsFollowTheBase() {
        assertEquals("http://h:1/v1/groups/g/heartbeat", HeartbeatUrls.one("http://h:1", "g").toString());
        assertEquals("http://h:1/p/v1/groups/a%20b/heartbeat", HeartbeatUrls.one("http://h:1/p/", "a b").toString());
        assertEquals(2, HeartbeatUrls.all(" http://a:1 , ,http://b:2", "g").size());
        assertThrows(IllegalArgumentException.class, () -> HeartbeatUrls.all("ftp://x", "g"));
        assertThrows(IllegalArgumentException.class, () -> HeartbeatUrls.all(" , ", "g"));
    }
}
