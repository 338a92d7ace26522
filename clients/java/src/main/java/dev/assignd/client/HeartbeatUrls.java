package dev.assignd.client;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a group's requests go: {@code {base}/v1/groups/{group}/heartbeat} (or
 * another route of the group) for each bootstrap URL.
 */
final class HeartbeatUrls {

    private HeartbeatUrls() {
    }

    /**
     * The heartbeat URL at each of {@code urls} (comma-separated base URLs,
     * blanks ignored), in order.
     *
     * @throws IllegalArgumentException if there is none, or one is not an http(s) base URL
     */
    static List<URI> all(String urls, String group) {
        return all(urls, group, "heartbeat");
    }

    /** The URL of the group's route {@code tail} (e.g. {@code routes}) at each of {@code urls}. */
    static List<URI> all(String urls, String group, String tail) {
        List<URI> heartbeats = new ArrayList<>();
        for (String base : urls.split(",")) {
            if (!base.isBlank()) {
                heartbeats.add(one(base.trim(), group, tail));
            }
        }
        if (heartbeats.isEmpty()) {
            throw new IllegalArgumentException("no host URL");
        }
        return heartbeats;
    }

    static URI one(String base, String group) {
        return one(base, group, "heartbeat");
    }

    static URI one(String base, String group, String tail) {
        URI uri;
        try {
            uri = new URI(base);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("url " + base + ": " + e.getMessage(), e);
        }
        String scheme = uri.getScheme();
        if (uri.isOpaque() || uri.getRawAuthority() == null
                || !("http".equalsIgnoreCase(scheme) || "https".equalsIgnoreCase(scheme))) {
            throw new IllegalArgumentException("url " + base + " is not an http:// base URL");
        }
        String path = uri.getRawPath() == null ? "" : uri.getRawPath();
        if (path.endsWith("/")) {
            path = path.substring(0, path.length() - 1);
        }
        return URI.create(scheme.toLowerCase(java.util.Locale.ROOT) + "://" + uri.getRawAuthority() + path
                + "/v1/groups/" + encodeSegment(group) + "/" + tail);
    }

    /** Percent-encodes a path segment: everything but RFC 3986's unreserved characters. */
    static String encodeSegment(String segment) {
        StringBuilder out = new StringBuilder();
        for (byte b : segment.getBytes(StandardCharsets.UTF_8)) {
            char c = (char) (b & 0xff);
            if (c < 0x80 && (Character.isLetterOrDigit(c) || c == '-' || c == '.' || c == '_' || c == '~')) {
                out.append(c);
            } else {
                out.append('%').append(String.format("%02X", b & 0xff));
            }
        }
        return out.toString();
    }
}
