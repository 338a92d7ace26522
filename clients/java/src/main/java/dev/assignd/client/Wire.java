package dev.assignd.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The heartbeat's JSON bodies as the host reads and writes them: the
 * request, the 200 answer (read leniently: a list, flag or lease it leaves
 * out reads as empty, false or unknown), and the error body
 * {@code {"error": {"code", "message"}}}.
 */
public final class Wire {

    static final ObjectMapper MAPPER = new ObjectMapper();

    private Wire() {
    }

    /** The request as JSON, fields in the host's order, {@code null} ones absent. */
    public static ObjectNode encode(HeartbeatRequest request) {
        JsonNodeFactory json = JsonNodeFactory.instance;
        ObjectNode body = json.objectNode();
        body.put("member_id", request.memberId());
        if (request.memberName() != null) {
            body.put("member_name", request.memberName());
        }
        body.put("member_epoch", request.memberEpoch());
        if (request.topics() != null) {
            ArrayNode topics = body.putArray("topics");
            request.topics().forEach(topics::add);
        }
        if (request.rack() != null) {
            body.put("rack", request.rack());
        }
        if (request.capacity() != null) {
            body.put("capacity", request.capacity());
        }
        if (request.owned() != null) {
            body.set("owned", TaskRanges.write(request.owned()));
        }
        if (request.lags() != null) {
            ArrayNode lags = body.putArray("lags");
            for (Lag lag : request.lags()) {
                lags.addArray().add(lag.task().topic()).add(lag.task().partition()).add(lag.lag());
            }
        }
        body.put("drain", request.drain());
        body.put("task_ranges", request.taskRanges());
        if (request.endpoint() != null) {
            body.put("endpoint", request.endpoint());
        }
        if (request.metadata() != null) {
            ObjectNode metadata = body.putObject("metadata");
            new TreeMap<>(request.metadata()).forEach(metadata::put);
        }
        if (request.loads() != null) {
            ArrayNode loads = body.putArray("loads");
            for (LoadItem item : request.loads()) {
                ArrayNode row = loads.addArray().add(item.topic()).add(item.first());
                if (item.first() != item.last()) {
                    row.add(item.last());
                }
                row.add(item.load());
            }
        }
        if (request.utilisation() != null) {
            body.put("utilisation", request.utilisation());
        }
        if (request.loadCapacity() != null) {
            body.put("load_capacity", request.loadCapacity());
        }
        return body;
    }

    public static byte[] encodeBytes(HeartbeatRequest request) {
        try {
            return MAPPER.writeValueAsBytes(encode(request));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a JSON tree always writes", e);
        }
    }

    /** Reads a 200 answer's body. */
    public static HeartbeatResponse decodeResponse(byte[] body) throws WireException {
        return decodeResponse(parse(body));
    }

    /** Reads a 200 answer already parsed as JSON. */
    public static HeartbeatResponse decodeResponse(JsonNode body) throws WireException {
        if (body == null || !body.isObject()) {
            throw new WireException("a heartbeat answer is a JSON object");
        }
        JsonNode memberId = body.get("member_id");
        if (memberId == null || !memberId.isTextual()) {
            throw new WireException("member_id: a string is required");
        }
        return new HeartbeatResponse(
                memberId.textValue(),
                required(body, "member_epoch"),
                required(body, "heartbeat_interval_ms"),
                new TreeSet<>(TaskRanges.read(body.get("active"))),
                new TreeSet<>(TaskRanges.read(body.get("revoking"))),
                new TreeSet<>(TaskRanges.read(body.get("learner"))),
                new TreeSet<>(TaskRanges.read(body.get("standby"))),
                flag(body, "draining"),
                flag(body, "drained"),
                optional(body, "lease_ms"),
                optional(body, "unreached_lease_ms"),
                optional(body, "unreached_flight_ms"),
                LoadReport.fromWire(body.path("load_report").textValue()));
    }

    /** The error body's code and message, or {@code null} if {@code body} is not one. */
    public static ErrorBody decodeError(byte[] body) {
        try {
            JsonNode error = MAPPER.readTree(body).get("error");
            if (error == null || !error.isObject()) {
                return null;
            }
            JsonNode code = error.get("code");
            JsonNode message = error.get("message");
            if (code == null || !code.isTextual() || message == null || !message.isTextual()) {
                return null;
            }
            return new ErrorBody(code.textValue(), message.textValue());
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The host's error body. */
    public record ErrorBody(String code, String message) {
    }

    static JsonNode parse(byte[] body) throws WireException {
        try {
            JsonNode node = MAPPER.readTree(body);
            if (node == null || node.isMissingNode()) {
                throw new WireException("an empty body");
            }
            return node;
        } catch (IOException e) {
            throw new WireException("not JSON: " + e.getMessage());
        }
    }

    private static long required(JsonNode body, String field) throws WireException {
        Long value = optional(body, field);
        if (value == null) {
            throw new WireException(field + ": a whole number is required");
        }
        return value;
    }

    private static Long optional(JsonNode body, String field) throws WireException {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) {
            return null;
        }
        if (!node.isIntegralNumber() || !node.canConvertToLong() || node.longValue() < 0) {
            throw new WireException(field + ": a whole number from 0 to " + Long.MAX_VALUE + ", not " + node);
        }
        return node.longValue();
    }

    private static boolean flag(JsonNode body, String field) throws WireException {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) {
            return false;
        }
        if (!node.isBoolean()) {
            throw new WireException(field + ": true or false, not " + node);
        }
        return node.booleanValue();
    }
}
