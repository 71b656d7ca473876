package dev.snowline.ycsb;

import dev.snowline.v1.InfoReply;
import dev.snowline.v1.InfoRequest;
import dev.snowline.v1.SnowlineGrpc;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One gRPC channel to one snowline endpoint ({@code host:port}), shared by every DB instance of this JVM
 * that uses that target (a channel multiplexes calls), and the endpoint's {@code Info}, asked once. Plain TCP,
 * or TLS verified against a CA certificate file (snowline.tls_ca: the cluster's DIR/tls/ca.pem).
 */
final class Endpoint {
  private static final Map<String, Endpoint> OPEN = new HashMap<>();

  final String target;
  final ManagedChannel channel;
  /** The endpoint's Info, or null when the Info call failed (then every call is tried as if offered). */
  final InfoReply info;
  private int refs;

  private Endpoint(String target, long deadlineMs, String tlsCa) {
    this.target = target;
    if (tlsCa == null || tlsCa.isBlank()) {
      this.channel = ManagedChannelBuilder.forTarget(target).usePlaintext().build();
    } else {
      try {
        this.channel = Grpc.newChannelBuilder(target,
            TlsChannelCredentials.newBuilder().trustManager(new File(tlsCa)).build()).build();
      } catch (IOException e) {
        throw new UncheckedIOException("reading the CA certificate " + tlsCa, e);
      }
    }
    InfoReply got = null;
    try {
      got = SnowlineGrpc.newBlockingStub(channel).withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS)
          .info(InfoRequest.getDefaultInstance());
      SnowlineError.logOnce("info-ok:" + target, target + ": protocol " + got.getProtocol() + " (level " + got.getLevel()
          + ", family " + got.getFamily() + "), dc " + got.getDc() + " node " + got.getNode() + ", "
          + got.getDcs() + " dc(s) x " + got.getPartitions() + " partition(s), api " + got.getApiVersion()
          + ", max value " + got.getMaxValueBytes() + " B, op timeout " + got.getOpTimeoutMs() + " ms, offers: "
          + describe(got));
    } catch (StatusRuntimeException e) {
      SnowlineError err = SnowlineError.of(e);
      SnowlineError.logOnce("info:" + target, "Info on " + target + " failed (" + err
          + "); going on without knowing what the protocol offers");
      err.logFirst("Info");
    }
    this.info = got;
  }

  static String describe(InfoReply info) {
    var o = info.getOffers();
    StringBuilder sb = new StringBuilder();
    if (o.getReadOnly()) sb.append("read-only ");
    if (o.getMultiKeyReadOnly()) sb.append("multi-key-read-only ");
    if (o.getBlindWrites()) sb.append("blind-writes ");
    if (o.getWriteOnlyTransactions()) sb.append("write-only-transactions ");
    if (o.getInteractive()) sb.append("interactive ");
    if (o.getStoredProcedures()) sb.append("stored-procedures ");
    return sb.length() == 0 ? "(nothing)" : sb.toString().trim();
  }

  static synchronized Endpoint acquire(String target, long deadlineMs, String tlsCa) {
    Endpoint e = OPEN.get(target);
    if (e == null) {
      e = new Endpoint(target, deadlineMs, tlsCa);
      OPEN.put(target, e);
    }
    e.refs++;
    return e;
  }

  void release() {
    synchronized (Endpoint.class) {
      if (--refs > 0) {
        return;
      }
      OPEN.remove(target);
    }
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException ie) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  SnowlineGrpc.SnowlineBlockingStub stub(long deadlineMs) {
    return SnowlineGrpc.newBlockingStub(channel).withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS);
  }

  boolean offersInteractive() {
    return info == null || info.getOffers().getInteractive();
  }

  boolean offersMultiKeyReadOnly() {
    return info == null || info.getOffers().getMultiKeyReadOnly();
  }

  boolean offersWriteOnly() {
    return info == null || info.getOffers().getWriteOnlyTransactions();
  }
}
