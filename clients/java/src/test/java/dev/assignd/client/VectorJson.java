package dev.assignd.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/** The machine's inputs and outputs in the conformance vectors' JSON. */
final class VectorJson {

    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private VectorJson() {
    }

    static ArrayNode tasks(Collection<Task> tasks) {
        ArrayNode list = JSON.arrayNode();
        tasks.forEach(task -> list.addArray().add(task.topic()).add(task.partition()));
        return list;
    }

    static List<Task> readTasks(JsonNode list) {
        List<Task> tasks = new ArrayList<>();
        list.forEach(item -> tasks.add(new Task(item.get(0).textValue(), item.get(1).intValue())));
        return tasks;
    }

    static ObjectNode assignment(Assignment assignment) {
        ObjectNode node = JSON.objectNode();
        node.set("active", tasks(assignment.active()));
        node.set("revoking", tasks(assignment.revoking()));
        node.set("learner", tasks(assignment.learner()));
        node.set("standby", tasks(assignment.standby()));
        node.put("draining", assignment.draining());
        return node;
    }

    static ObjectNode failure(Failure failure) {
        ObjectNode node = JSON.objectNode().put("kind", failure.kind());
        if (failure instanceof Failure.Refused refused) {
            node.put("status", refused.status()).put("code", refused.code());
            node.put("retry_after_ms", refused.retryAfterMs());
        } else if (failure instanceof Failure.Server server) {
            node.put("status", server.status());
            node.put("retry_after_ms", server.retryAfterMs());
        }
        return node;
    }

    static Failure readFailure(JsonNode node) {
        String message = "from a vector";
        JsonNode retry = node.get("retry_after_ms");
        Long retryAfterMs = retry == null || retry.isNull() ? null : retry.longValue();
        switch (node.get("kind").textValue()) {
            case "unreached":
                return new Failure.Unreached(message);
            case "no_answer":
                return new Failure.NoAnswer(message);
            case "refused":
                return new Failure.Refused(node.get("status").intValue(), node.get("code").textValue(),
                        retryAfterMs, message);
            case "server":
                return new Failure.Server(node.get("status").intValue(), retryAfterMs, message);
            case "unreadable":
                return new Failure.Unreadable(message);
            default:
                throw new IllegalArgumentException("unknown failure " + node);
        }
    }

    static List<Lag> readLags(JsonNode rows) {
        List<Lag> lags = new ArrayList<>();
        rows.forEach(row -> lags.add(new Lag(new Task(row.get(0).textValue(), row.get(1).intValue()),
                row.get(2).longValue())));
        return lags;
    }

    static ObjectNode event(MemberEvent event) {
        ObjectNode node = JSON.objectNode();
        if (event instanceof MemberEvent.Joined e) {
            node.put("type", "joined").put("member_id", e.memberId());
        } else if (event instanceof MemberEvent.Assigned e) {
            node.put("type", "assigned").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.Revoked e) {
            node.put("type", "revoked").put("ack", e.ack()).set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.LearnerStarted e) {
            node.put("type", "learner_started").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.LearnerStopped e) {
            node.put("type", "learner_stopped").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.Promoted e) {
            node.put("type", "promoted").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.StandbyStarted e) {
            node.put("type", "standby_started").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.StandbyStopped e) {
            node.put("type", "standby_stopped").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.Draining) {
            node.put("type", "draining");
        } else if (event instanceof MemberEvent.Drained) {
            node.put("type", "drained");
        } else if (event instanceof MemberEvent.Lost e) {
            node.put("type", "lost").set("tasks", tasks(e.tasks()));
        } else if (event instanceof MemberEvent.Fenced e) {
            node.put("type", "fenced").put("rejoining", e.rejoining());
        } else if (event instanceof MemberEvent.Replaced e) {
            node.put("type", "replaced").put("member_name", e.memberName());
        } else if (event instanceof MemberEvent.Error e) {
            node.put("type", "error").set("failure", failure(e.failure()));
        }
        return node;
    }

    /**
     * {@code node} with every {@code null} object member dropped and every whole
     * number as one type, so that values compare as JSON values.
     */
    static JsonNode normalized(JsonNode node) {
        if (node == null) {
            return JSON.nullNode();
        }
        if (node.isFloatingPointNumber()) {
            // A load the Rust machine writes as 100.0 and a port as 100 are one value.
            double value = node.doubleValue();
            return value == Math.rint(value) && Math.abs(value) < 0x1p53 ? JSON.numberNode((long) value)
                    : JSON.numberNode(value);
        }
        if (node.isIntegralNumber()) {
            BigInteger value = node.bigIntegerValue();
            return value.bitLength() < 64 ? JSON.numberNode(value.longValue()) : JSON.numberNode(value);
        }
        if (node.isArray()) {
            ArrayNode copy = JSON.arrayNode();
            node.forEach(item -> copy.add(normalized(item)));
            return copy;
        }
        if (node.isObject()) {
            ObjectNode copy = JSON.objectNode();
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> field = it.next();
                if (!field.getValue().isNull()) {
                    copy.set(field.getKey(), normalized(field.getValue()));
                }
            }
            return copy;
        }
        return node;
    }
}
