package dev.assignd.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BiFunction;
import java.util.function.Function;

/** A local HTTP server answering heartbeats as a test scripts it. */
final class FakeHost implements AutoCloseable {

    /** An answer: status, headers, body, and how long to wait before it. */
    record Reply(int status, Map<String, String> headers, String body, long delayMs) {
        static Reply json(int status, String body) {
            return new Reply(status, Map.of("Content-Type", "application/json"), body, 0);
        }

        static Reply error(int status, String code) {
            return json(status, "{\"error\": {\"code\": \"" + code + "\", \"message\": \"" + code + " here\"}}");
        }

        Reply withHeader(String name, String value) {
            Map<String, String> more = new java.util.HashMap<>(headers);
            more.put(name, value);
            return new Reply(status, more, body, delayMs);
        }

        Reply after(long ms) {
            return new Reply(status, headers, body, ms);
        }
    }

    /** A request the host got. */
    record Seen(String path, String authorization, String body) {
    }

    static final String ANSWER = "{\"member_id\": \"m-1\", \"member_epoch\": 1, \"heartbeat_interval_ms\": 300,"
            + " \"active\": [[\"orders\", 0, 2]], \"lease_ms\": 3000}";

    private final HttpServer server;
    private final ExecutorService threads = Executors.newCachedThreadPool();
    final List<Seen> seen = new CopyOnWriteArrayList<>();

    /** A host whose {@code n}th answer (from 0) is {@code reply.apply(n)}. */
    FakeHost(Function<Integer, Reply> reply) throws IOException {
        this((n, body) -> reply.apply(n));
    }

    /** A host that answers each request, given its number and body. */
    FakeHost(BiFunction<Integer, String, Reply> reply) throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(threads);
        server.createContext("/", exchange -> answer(exchange, reply));
        server.start();
    }

    private void answer(HttpExchange exchange, BiFunction<Integer, String, Reply> replies) throws IOException {
        String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        Reply reply;
        synchronized (this) {
            reply = replies.apply(seen.size(), body);
            seen.add(new Seen(exchange.getRequestURI().getPath(),
                    exchange.getRequestHeaders().getFirst("Authorization"), body));
        }
        if (reply.delayMs() > 0) {
            try {
                Thread.sleep(reply.delayMs());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        reply.headers().forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
        byte[] bytes = reply.body().getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(reply.status(), bytes.length == 0 ? -1 : bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    String base() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** A base URL nothing listens on: connections are refused. */
    static String refusing() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return "http://127.0.0.1:" + socket.getLocalPort();
        }
    }

    @Override
    public void close() {
        server.stop(0);
        threads.shutdownNow();
    }
}
