package dev.assignd.client;

/**
 * The host refused the router's requests (401, 403, 404, or another 4xx): a
 * wrong token, an unknown group. The router keeps asking, slowly.
 */
public final class RouterRefusedException extends Exception {

    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;

    public RouterRefusedException(int status, String code, String message) {
        super("the host refused the routes request (" + code + ", HTTP " + status + "): " + message);
        this.status = status;
        this.code = code;
    }

    /** The HTTP status. */
    public int status() {
        return status;
    }

    /** The host's error code ({@code unauthorized}, {@code forbidden}, {@code group_not_found}, ...), or {@code null}. */
    public String code() {
        return code;
    }
}
