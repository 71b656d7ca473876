package dev.snowline.ycsb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.api.Test;
import site.ycsb.Status;

class SnowlineErrorTest {
  private static SnowlineError err(io.grpc.Status status, String kind, String cause) {
    Metadata md = new Metadata();
    if (kind != null) {
      md.put(SnowlineError.ERROR_KEY, kind);
    }
    if (cause != null) {
      md.put(SnowlineError.ABORT_CAUSE_KEY, cause);
    }
    return SnowlineError.of(new StatusRuntimeException(status.withDescription("msg"), md));
  }

  @Test
  void conflictIsARetryableAbort() {
    SnowlineError e = err(io.grpc.Status.ABORTED, "conflict", "deadlock");
    assertTrue(e.isAbort());
    assertTrue(e.isRetryable());
    assertEquals("deadlock", e.cause);
    assertEquals(Status.ERROR, e.toYcsb());
    assertNull(e.defect());
  }

  @Test
  void abortedIsNotRetried() {
    SnowlineError e = err(io.grpc.Status.ABORTED, "aborted", "user");
    assertTrue(e.isAbort());
    assertFalse(e.isRetryable());
    assertEquals(Status.ERROR, e.toYcsb());
  }

  @Test
  void kindsMapToYcsbStatuses() {
    assertEquals(Status.NOT_IMPLEMENTED, err(io.grpc.Status.UNIMPLEMENTED, "not-offered", null).toYcsb());
    assertEquals(Status.BAD_REQUEST, err(io.grpc.Status.INVALID_ARGUMENT, "invalid-argument", null).toYcsb());
    assertEquals(Status.SERVICE_UNAVAILABLE, err(io.grpc.Status.UNAVAILABLE, "unavailable", null).toYcsb());
    assertEquals(Status.SERVICE_UNAVAILABLE, err(io.grpc.Status.RESOURCE_EXHAUSTED, "unavailable", null).toYcsb());
    assertEquals(Status.ERROR, err(io.grpc.Status.UNKNOWN, "outcome-unknown", null).toYcsb());
    assertTrue(err(io.grpc.Status.NOT_FOUND, "unknown-session", null).isUnknownSession());
    // without metadata, the gRPC code decides
    assertEquals(Status.NOT_IMPLEMENTED, err(io.grpc.Status.UNIMPLEMENTED, null, null).toYcsb());
    assertEquals(Status.SERVICE_UNAVAILABLE, err(io.grpc.Status.UNAVAILABLE, null, null).toYcsb());
    assertTrue(err(io.grpc.Status.ABORTED, null, null).isAbort());
    assertFalse(err(io.grpc.Status.ABORTED, null, null).isRetryable());
  }

  @Test
  void defectsAreNamed() {
    assertNotNull(err(io.grpc.Status.INTERNAL, null, null).defect());
    assertNotNull(err(io.grpc.Status.UNKNOWN, "conflict", "vote").defect());
    assertNotNull(err(io.grpc.Status.ABORTED, "conflict", null).defect());
    assertNotNull(err(io.grpc.Status.ABORTED, "weird", null).defect());
    assertNull(err(io.grpc.Status.DEADLINE_EXCEEDED, "outcome-unknown", null).defect());
    assertNull(err(io.grpc.Status.DEADLINE_EXCEEDED, null, null).defect());
  }
}
