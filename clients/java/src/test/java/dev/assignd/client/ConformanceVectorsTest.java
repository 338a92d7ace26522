package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays every conformance vector generated from the Rust machine
 * ({@code clients/conformance/vectors/*.json}, found at test time) against
 * {@link MemberMachine}, comparing every output after every step.
 */
class ConformanceVectorsTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    static Path vectorDirectory() {
        String configured = System.getenv("ASSIGND_VECTORS");
        return Path.of(configured != null ? configured : "../conformance/vectors");
    }

    static List<Path> vectorFiles() throws IOException {
        try (Stream<Path> files = Files.list(vectorDirectory())) {
            return files.filter(f -> f.getFileName().toString().endsWith(".json")).sorted()
                    .collect(Collectors.toList());
        }
    }

    @TestFactory
    Stream<DynamicTest> everyVectorReplays() throws IOException {
        List<Path> files = vectorFiles();
        assertFalse(files.isEmpty(), "no vectors in " + vectorDirectory().toAbsolutePath());
        Path index = vectorDirectory().resolve("INDEX");
        if (Files.exists(index)) {
            for (String name : Files.readAllLines(index)) {
                assertTrue(name.isBlank() || Files.isRegularFile(vectorDirectory().resolve(name.trim())),
                        "INDEX names " + name + ", which is missing");
            }
        }
        return files.stream().map(file -> DynamicTest.dynamicTest(
                file.getFileName().toString(), () -> replay(MAPPER.readTree(file.toFile()))));
    }

    static void replay(JsonNode vector) throws WireException {
        MemberMachine machine = new MemberMachine(config(vector.get("config")), 0);
        int index = 0;
        for (JsonNode step : vector.get("steps")) {
            String where = vector.get("name").textValue() + " step " + index + " " + step.get("input");
            ObjectNode actual = apply(machine, step.get("at").longValue(), step.get("input"));
            compare(where, step.get("expect"), actual);
            index++;
        }
    }

    static MachineConfig config(JsonNode config) {
        List<String> topics = new ArrayList<>();
        config.get("topics").forEach(topic -> topics.add(topic.textValue()));
        return new MachineConfig(text(config.get("member_name")), topics, text(config.get("rack")),
                config.get("capacity").intValue(), config.get("id_prefix").textValue(), text(config.get("endpoint")),
                pairs(config.get("metadata")), config.path("load_threshold").asDouble(0.1));
    }

    /** Feeds one input to the machine; returns every output it is checked on. */
    static ObjectNode apply(MemberMachine machine, long at, JsonNode input) throws WireException {
        ObjectNode outputs = JSON.objectNode();
        String type = input.get("type").textValue();
        switch (type) {
            case "poll_request": {
                Optional<HeartbeatRequest> request = machine.pollRequest(at);
                outputs.set("request", request.<JsonNode>map(Wire::encode).orElse(JSON.nullNode()));
                break;
            }
            case "answer":
                machine.onAnswer(Wire.decodeResponse(input.get("body")), at);
                break;
            case "failure":
                machine.onFailure(VectorJson.readFailure(input.get("failure")), at);
                break;
            case "ack":
                machine.ack(input.get("ack").longValue(), at);
                break;
            case "report_lags":
                machine.reportLags(VectorJson.readLags(input.get("lags")));
                break;
            case "drain":
                machine.drain(at);
                break;
            case "leave":
                machine.leave(at);
                break;
            case "tick":
                machine.tick(at);
                break;
            case "set_endpoint":
                machine.setEndpoint(text(input.get("endpoint")), pairs(input.get("metadata")));
                break;
            case "set_loads":
                for (JsonNode row : input.get("loads")) {
                    assertTrue(machine.setLoad(new Task(row.get(0).textValue(), row.get(1).intValue()),
                            row.get(2).doubleValue()), "set_loads " + row);
                }
                break;
            case "set_utilisation":
                assertTrue(machine.setUtilisation(number(input.get("utilisation"))));
                break;
            case "set_load_capacity":
                assertTrue(machine.setLoadCapacity(number(input.get("load_capacity"))));
                break;
            case "check": {
                ArrayNode answers = outputs.putArray("may_process");
                VectorJson.readTasks(input.get("may_process")).forEach(t -> answers.add(machine.mayProcess(t, at)));
                break;
            }
            default:
                fail("unknown input " + input);
        }
        ArrayNode events = outputs.putArray("events");
        for (Optional<MemberEvent> event = machine.pollEvent(); event.isPresent(); event = machine.pollEvent()) {
            events.add(VectorJson.event(event.get()));
        }
        outputs.set("timeout", millis(machine.pollTimeout()));
        outputs.set("lease_until", millis(machine.leaseUntil()));
        outputs.set("member_id", machine.memberId().<JsonNode>map(JSON::textNode).orElse(JSON.nullNode()));
        outputs.put("member_epoch", machine.memberEpoch());
        outputs.set("assignment", VectorJson.assignment(machine.assignment()));
        outputs.set("stopped", machine.stopped().<JsonNode>map(r -> JSON.textNode(r.wireName()))
                .orElse(JSON.nullNode()));
        return outputs;
    }

    /** The outputs every step lists. */
    private static final List<String> ALWAYS = List.of(
            "events", "timeout", "lease_until", "member_id", "member_epoch", "assignment", "stopped");

    /** Compares every output the step expects; an output the replay does not produce is a failure. */
    static void compare(String where, JsonNode expect, ObjectNode actual) {
        ALWAYS.forEach(key -> assertTrue(expect.has(key), where + ": the vector lists no " + key));
        for (Iterator<Map.Entry<String, JsonNode>> it = expect.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> field = it.next();
            assertTrue(actual.has(field.getKey()), where + ": the replay has no output " + field.getKey());
            assertEquals(VectorJson.normalized(field.getValue()), VectorJson.normalized(actual.get(field.getKey())),
                    where + ": " + field.getKey());
        }
    }

    private static JsonNode millis(OptionalLong value) {
        return value.isPresent() ? JSON.numberNode(value.getAsLong()) : JSON.nullNode();
    }

    /** An object of strings; absent reads as empty. */
    private static Map<String, String> pairs(JsonNode node) {
        Map<String, String> out = new java.util.TreeMap<>();
        if (node != null && node.isObject()) {
            node.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().textValue()));
        }
        return out;
    }

    private static Double number(JsonNode node) {
        return node == null || node.isNull() ? null : node.doubleValue();
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.textValue();
    }
}
