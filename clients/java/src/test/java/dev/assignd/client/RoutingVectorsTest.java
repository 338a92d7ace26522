package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Replays the routing vectors ({@code clients/conformance/routes}): Kafka's
 * murmur2 and partitions, and every lookup of one table through its index.
 */
class RoutingVectorsTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    static JsonNode vectors(String name) throws IOException {
        return MAPPER.readTree(Files.readAllBytes(Path.of("../conformance/routes", name)));
    }

    static byte[] tableBody() throws IOException {
        return MAPPER.writeValueAsBytes(vectors("table.json").get("table"));
    }

    @Test
    void murmur2AndPartitionsMatchKafka() throws IOException {
        JsonNode cases = vectors("murmur2.json").get("cases");
        assertTrue(cases.size() > 10);
        for (JsonNode c : cases) {
            byte[] key = HexFormat.of().parseHex(c.get("key_hex").textValue());
            if (c.get("key").isTextual()) {
                assertEquals(c.get("key").textValue(), new String(key, java.nio.charset.StandardCharsets.UTF_8));
            }
            assertEquals(c.get("murmur2").intValue(), Partitioner.murmur2(key), c.toString());
            c.get("partitions").fields().forEachRemaining(p -> assertEquals(p.getValue().intValue(),
                    Partitioner.partitionForKey(key, Integer.parseInt(p.getKey())), c.toString()));
        }
        assertThrows(IllegalArgumentException.class, () -> Partitioner.partitionForKey("k", 0));
    }

    @Test
    void everyLookupOfTheTableMatches() throws Exception {
        RouteTable table = RouteTable.parse(tableBody(), System.nanoTime());
        assertEquals(42, table.epoch());
        assertEquals(Duration.ofSeconds(2), table.valid());
        for (JsonNode want : vectors("table.json").get("lookups")) {
            String topic = want.get("topic").textValue();
            Route route = want.has("key") ? table.ownerOf(topic, want.get("key").textValue())
                    : table.ownerOfPartition(topic, want.get("partition").intValue());
            String where = want.toString();
            assertEquals(want.get("partition").intValue(), route.partition(), where);
            assertEquals(Optional.ofNullable(want.get("owner").textValue()), route.owner().map(RouteMember::memberId),
                    where);
            assertEquals(Optional.ofNullable(want.get("moving_to").textValue()),
                    route.movingTo().map(RouteMember::memberId), where);
            assertEquals(ids(want.get("learners")), route.learners().stream().map(RouteMember::memberId).toList(),
                    where);
            assertEquals(ids(want.get("standbys")), route.standbys().stream().map(RouteMember::memberId).toList(),
                    where);
            assertEquals(42, route.epoch());
        }
        RouteMember owner = table.ownerOfPartition("orders", 0).owner().orElseThrow();
        assertEquals(Optional.of("http://10.0.0.5:8080"), owner.endpoint());
        assertEquals(Optional.of("worker-a"), owner.memberName());
        assertEquals(Map.of("zone", "a"), owner.metadata());
    }

    @Test
    void freshnessUnknownTopicsAndPartitionsPastTheCount() throws Exception {
        JsonNode vectors = vectors("table.json");
        long origin = System.nanoTime();
        for (JsonNode c : vectors.get("freshness")) {
            long sent = origin + Duration.ofMillis(c.get("sent_at_ms").longValue()).toNanos();
            long now = origin + Duration.ofMillis(c.get("now_ms").longValue()).toNanos();
            RouteTable table = RouteTable.parse(tableBody(), sent);
            assertEquals(c.get("fresh").booleanValue(), table.freshAt(now), c.toString());
            assertEquals(c.get("fresh").booleanValue(), table.routeAt("orders", 0, now).fresh(), c.toString());
        }
        RouteTable table = RouteTable.parse(tableBody(), origin);
        String unknown = vectors.get("unknown_topic").textValue();
        assertEquals(RouteNotFoundException.Reason.UNKNOWN_TOPIC,
                assertThrows(RouteNotFoundException.class, () -> table.ownerOf(unknown, "k")).reason());
        assertEquals(RouteNotFoundException.Reason.UNKNOWN_TOPIC,
                assertThrows(RouteNotFoundException.class, () -> table.ownerOfPartition(unknown, 0)).reason());
        JsonNode past = vectors.get("partition_out_of_range");
        assertEquals(RouteNotFoundException.Reason.PARTITION_OUT_OF_RANGE, assertThrows(RouteNotFoundException.class,
                () -> table.ownerOfPartition(past.get(0).textValue(), past.get(1).intValue())).reason());
    }

    @Test
    void aTableOfMoreTasksThanAGroupMayHaveIsRefused() {
        byte[] body = "{\"group\":\"g\",\"epoch\":1,\"group_epoch\":1,\"valid_ms\":0,\"topics\":{\"a\":2000000000}}"
                .getBytes(java.nio.charset.StandardCharsets.UTF_8);
        assertThrows(WireException.class, () -> RouteTable.parse(body, 0));
    }

    private static List<String> ids(JsonNode list) {
        List<String> out = new ArrayList<>();
        list.forEach(id -> out.add(id.textValue()));
        return out;
    }
}
