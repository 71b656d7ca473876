package dev.snowline.ycsb;

import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import site.ycsb.Status;

/**
 * One failed snowline call, classified by the API's error model: a gRPC status code plus the metadata entries
 * {@code snowline-error} (conflict, aborted, outcome-unknown, not-offered, invalid-argument, unavailable,
 * unknown-session) and, for aborts, {@code snowline-abort-cause} (conflict, certification, vote, deadlock,
 * timeout, user).
 *
 * <p>Mapping to YCSB: conflict and aborted -> {@link Status#ERROR} (and the abort is counted; only conflict is
 * retried); not-offered -> {@link Status#NOT_IMPLEMENTED}; invalid-argument -> {@link Status#BAD_REQUEST};
 * unavailable -> {@link Status#SERVICE_UNAVAILABLE}; outcome-unknown, unknown-session and anything else ->
 * {@link Status#ERROR}. A status without {@code snowline-error} is mapped by its gRPC code alone, and a
 * kind that does not match its gRPC code is reported once as a server-side defect.
 */
public final class SnowlineError {
  public static final Metadata.Key<String> ERROR_KEY =
      Metadata.Key.of("snowline-error", Metadata.ASCII_STRING_MARSHALLER);
  public static final Metadata.Key<String> ABORT_CAUSE_KEY =
      Metadata.Key.of("snowline-abort-cause", Metadata.ASCII_STRING_MARSHALLER);

  private static final Set<String> LOGGED = ConcurrentHashMap.newKeySet();

  /** The gRPC status code. */
  public final io.grpc.Status.Code code;
  /** The {@code snowline-error} kind, or null when the server sent none. */
  public final String kind;
  /** The {@code snowline-abort-cause}, or null. */
  public final String cause;
  /** The status's description. */
  public final String message;

  public SnowlineError(io.grpc.Status.Code code, String kind, String cause, String message) {
    this.code = code;
    this.kind = kind == null ? null : kind.toLowerCase(Locale.ROOT);
    this.cause = cause == null ? null : cause.toLowerCase(Locale.ROOT);
    this.message = message;
  }

  /** Classifies a failed call. */
  public static SnowlineError of(StatusRuntimeException e) {
    io.grpc.Status st = e.getStatus();
    Metadata trailers = e.getTrailers();
    String kind = trailers == null ? null : trailers.get(ERROR_KEY);
    String cause = trailers == null ? null : trailers.get(ABORT_CAUSE_KEY);
    return new SnowlineError(st.getCode(), kind, cause, st.getDescription());
  }

  /** True for a transaction abort (ABORTED, or the kinds conflict/aborted). */
  public boolean isAbort() {
    return "conflict".equals(kind) || "aborted".equals(kind) || (kind == null && code == io.grpc.Status.Code.ABORTED);
  }

  /** True when running the transaction again may commit: the kind conflict. */
  public boolean isRetryable() {
    return "conflict".equals(kind);
  }

  public boolean isUnknownSession() {
    return "unknown-session".equals(kind);
  }

  public boolean isNotOffered() {
    return "not-offered".equals(kind) || (kind == null && code == io.grpc.Status.Code.UNIMPLEMENTED);
  }

  /** The YCSB status this failure is reported as. */
  public Status toYcsb() {
    if (kind != null) {
      switch (kind) {
        case "conflict":
        case "aborted":
        case "outcome-unknown":
        case "unknown-session":
          return Status.ERROR;
        case "not-offered":
          return Status.NOT_IMPLEMENTED;
        case "invalid-argument":
          return Status.BAD_REQUEST;
        case "unavailable":
          return Status.SERVICE_UNAVAILABLE;
        default:
          break;
      }
    }
    switch (code) {
      case UNIMPLEMENTED:
        return Status.NOT_IMPLEMENTED;
      case UNAVAILABLE:
      case RESOURCE_EXHAUSTED:
        return Status.SERVICE_UNAVAILABLE;
      case INVALID_ARGUMENT:
        return Status.BAD_REQUEST;
      default:
        return Status.ERROR;
    }
  }

  /**
   * The gRPC codes the API's header comment allows for this kind, or null for an unknown kind. Used to
   * report a server that answers a kind with the wrong status.
   */
  static Set<io.grpc.Status.Code> expectedCodes(String kind) {
    switch (kind) {
      case "conflict":
      case "aborted":
        return Set.of(io.grpc.Status.Code.ABORTED);
      case "outcome-unknown":
        return Set.of(io.grpc.Status.Code.UNKNOWN, io.grpc.Status.Code.DEADLINE_EXCEEDED);
      case "not-offered":
        return Set.of(io.grpc.Status.Code.UNIMPLEMENTED);
      case "invalid-argument":
        return Set.of(io.grpc.Status.Code.INVALID_ARGUMENT);
      case "unavailable":
        return Set.of(io.grpc.Status.Code.UNAVAILABLE, io.grpc.Status.Code.RESOURCE_EXHAUSTED);
      case "unknown-session":
        return Set.of(io.grpc.Status.Code.NOT_FOUND);
      default:
        return null;
    }
  }

  /**
   * Describes what in this failure breaks the API's error model (no kind, an unknown kind, a kind with the
   * wrong code, an abort without a cause), or null when it follows the model. A deadline the client itself
   * set running out (DEADLINE_EXCEEDED without a kind) and a server that cannot be reached (UNAVAILABLE
   * without a kind) are the transport's, not the server's, and are not defects.
   */
  public String defect() {
    if (kind == null) {
      if (code == io.grpc.Status.Code.DEADLINE_EXCEEDED || code == io.grpc.Status.Code.UNAVAILABLE
          || code == io.grpc.Status.Code.CANCELLED) {
        return null;
      }
      return "status " + code + " carries no snowline-error metadata";
    }
    Set<io.grpc.Status.Code> codes = expectedCodes(kind);
    if (codes == null) {
      return "unknown snowline-error kind '" + kind + "'";
    }
    if (!codes.contains(code)) {
      return "snowline-error '" + kind + "' comes with status " + code + " (the API says " + codes + ")";
    }
    if (("conflict".equals(kind) || "aborted".equals(kind)) && cause == null) {
      return "abort without snowline-abort-cause";
    }
    return null;
  }

  /** A short key naming this kind of failure, for once-only logging. */
  public String logKey() {
    return code + "/" + kind + "/" + cause;
  }

  @Override
  public String toString() {
    return code + " snowline-error=" + kind + (cause == null ? "" : " snowline-abort-cause=" + cause)
        + (message == null ? "" : ": " + message);
  }

  /** Prints a line to stderr once per distinct key (no log flood). Returns true when it printed. */
  public static boolean logOnce(String key, String line) {
    if (LOGGED.add(key)) {
      System.err.println("[snowline] " + line);
      return true;
    }
    return false;
  }

  /** Logs the first failure of each kind (and the first of each kind of server-side defect). */
  public void logFirst(String operation) {
    logOnce("error:" + logKey(), "first " + (kind == null ? code.toString() : kind) + " error (in " + operation
        + "; later ones are not printed): " + this);
    String d = defect();
    if (d != null) {
      logOnce("defect:" + d, "SERVER DEFECT? " + d + " (in " + operation + ": " + this + ")");
    }
  }
}
