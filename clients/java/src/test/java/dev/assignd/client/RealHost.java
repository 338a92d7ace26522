package dev.assignd.client;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The real binary ({@code ASSIGND_BIN}) serving on a free port with a fresh
 * data directory, for the smoke tests; the test is skipped without it.
 */
final class RealHost implements AutoCloseable {

    /** The server wants 16 bytes at least. */
    static final String ADMIN_TOKEN = "t0k-smoke-test-admin";

    private final Process server;
    private final String base;

    RealHost() throws IOException {
        String bin = System.getenv("ASSIGND_BIN");
        assumeTrue(bin != null && !bin.isEmpty(), "ASSIGND_BIN is not set");
        Path dir = Files.createTempDirectory("assignd-java-smoke");
        ProcessBuilder serve = new ProcessBuilder(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                dir.resolve("data").toString())
                .redirectError(dir.resolve("server.stderr").toFile());
        serve.environment().put("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN);
        server = serve.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
        String first = out.readLine();
        assertTrue(first != null && first.startsWith("listening on "), "the server said " + first);
        base = first.substring("listening on ".length()).trim();
    }

    String base() {
        return base;
    }

    /** Creates group {@code g} with {@code config} (JSON) as the admin. */
    void createGroup(String config) throws IOException, InterruptedException {
        HttpResponse<String> created = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base
                + "/v1/groups/g")).header("Authorization", "Bearer " + ADMIN_TOKEN)
                .header("Content-Type", "application/json").PUT(HttpRequest.BodyPublishers.ofString(config)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertTrue(created.statusCode() / 100 == 2, created.statusCode() + " " + created.body());
    }

    @Override
    public void close() throws InterruptedException {
        server.destroy();
        if (!server.waitFor(5, TimeUnit.SECONDS)) {
            server.destroyForcibly().waitFor();
        }
    }
}
