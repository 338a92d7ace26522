package dev.assignd.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A local host answering {@code GET .../routes} as assignd does: at once without
 * {@code after_epoch} or when the table is past it, else when it changes or after
 * {@code wait_ms}. The first requests may get scripted answers instead.
 */
final class FakeRoutes implements AutoCloseable {

    /** A request the host got, and when (by {@link System#nanoTime()}). */
    record Seen(URI uri, String authorization, long atNanos) {
    }

    private final HttpServer server;
    private final ExecutorService threads = Executors.newCachedThreadPool();
    final List<Seen> seen = new CopyOnWriteArrayList<>();
    /** The n-th request (from 0) gets this answer if set. */
    final Map<Integer, FakeHost.Reply> scripted = new ConcurrentHashMap<>();
    private long epoch;
    private String owner;
    /** The tables' promise: 60 s unless set, so that a watch waits the configured wait (under half of it). */
    volatile long validMs = 60_000;
    /** If set, every table answer's {@code Assignd-Routes-Waited-Ms}. */
    volatile String waitedMs;

    FakeRoutes(long epoch, String owner) throws IOException {
        this.epoch = epoch;
        this.owner = owner;
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(threads);
        server.createContext("/", this::answer);
        server.start();
    }

    String base() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Changes the table and wakes the waiting queries. */
    synchronized void set(long epoch, String owner) {
        this.epoch = epoch;
        this.owner = owner;
        notifyAll();
    }

    private void answer(HttpExchange exchange) throws IOException {
        URI uri = exchange.getRequestURI();
        FakeHost.Reply reply;
        synchronized (this) {
            int n = seen.size();
            seen.add(new Seen(uri, exchange.getRequestHeaders().getFirst("Authorization"), System.nanoTime()));
            reply = scripted.get(n);
            if (reply == null) {
                waitPast(uri);
                reply = FakeHost.Reply.json(200, body());
                if (waitedMs != null) {
                    reply = reply.withHeader("Assignd-Routes-Waited-Ms", waitedMs);
                }
            }
        }
        reply.headers().forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
        byte[] bytes = reply.body().getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(reply.status(), bytes.length == 0 ? -1 : bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    /** Holds a query past its epoch until the table changes or its wait ran out; called locked. */
    private void waitPast(URI uri) {
        Map<String, String> query = new java.util.HashMap<>();
        if (uri.getQuery() != null) {
            for (String pair : uri.getQuery().split("&")) {
                String[] kv = pair.split("=", 2);
                query.put(kv[0], kv.length > 1 ? kv[1] : "");
            }
        }
        if (!query.containsKey("after_epoch")) {
            return;
        }
        long asked = Long.parseLong(query.get("after_epoch"));
        long deadline = System.currentTimeMillis() + Long.parseLong(query.getOrDefault("wait_ms", "0"));
        try {
            while (epoch == asked && System.currentTimeMillis() < deadline) {
                wait(Math.max(1, deadline - System.currentTimeMillis()));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private String body() {
        return "{\"group\":\"g\",\"epoch\":" + epoch + ",\"group_epoch\":1,\"valid_ms\":" + validMs + ",\"topics\":{\"orders\":4},"
                + "\"members\":{\"" + owner + "\":{\"member_name\":null,\"endpoint\":\"http://" + owner
                + ":80\",\"metadata\":{\"zone\":\"a\"}}},\"active\":{\"" + owner + "\":[[\"orders\",0,3]]},"
                + "\"learner\":{},\"standby\":{},\"moving\":[],\"unowned\":[]}";
    }

    @Override
    public void close() {
        server.stop(0);
        threads.shutdownNow();
    }
}
