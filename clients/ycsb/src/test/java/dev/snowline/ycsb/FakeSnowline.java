package dev.snowline.ycsb;

import dev.snowline.v1.AbortReply;
import dev.snowline.v1.AbortRequest;
import dev.snowline.v1.BeginReply;
import dev.snowline.v1.BeginRequest;
import dev.snowline.v1.CloseSessionReply;
import dev.snowline.v1.CloseSessionRequest;
import dev.snowline.v1.CommitReply;
import dev.snowline.v1.CommitRequest;
import dev.snowline.v1.GetReply;
import dev.snowline.v1.GetRequest;
import dev.snowline.v1.InfoReply;
import dev.snowline.v1.InfoRequest;
import dev.snowline.v1.KeyValue;
import dev.snowline.v1.Offers;
import dev.snowline.v1.OpenSessionReply;
import dev.snowline.v1.OpenSessionRequest;
import dev.snowline.v1.PutReply;
import dev.snowline.v1.PutRequest;
import dev.snowline.v1.ReadOnlyReply;
import dev.snowline.v1.ReadOnlyRequest;
import dev.snowline.v1.ReadReply;
import dev.snowline.v1.ReadRequest;
import dev.snowline.v1.ReadResult;
import dev.snowline.v1.SessionRef;
import dev.snowline.v1.SnowlineGrpc;
import dev.snowline.v1.WriteOnlyReply;
import dev.snowline.v1.WriteOnlyRequest;
import dev.snowline.v1.WriteReply;
import dev.snowline.v1.WriteRequest;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A tiny in-memory stand-in for a snowline endpoint, for tests only: one store, optimistic interactive
 * transactions (commit fails with ABORTED, snowline-error conflict, cause certification, when a key it read
 * changed), and the API's error metadata. Listens on 127.0.0.1, a free port.
 */
final class FakeSnowline extends SnowlineGrpc.SnowlineImplBase implements AutoCloseable {
  private final boolean interactive;
  private final Map<String, String> values = new HashMap<>();
  private final Map<String, Long> versions = new HashMap<>();
  private long clock;
  private final Map<String, Session> sessions = new ConcurrentHashMap<>();
  private final AtomicLong nextSession = new AtomicLong();
  final AtomicLong conflicts = new AtomicLong();
  private final Server server;

  private static final class Session {
    Map<String, Long> readVersions;
    Map<String, String> writes;
  }

  FakeSnowline(boolean interactive) throws IOException {
    this(interactive, 0);
  }

  FakeSnowline(boolean interactive, int port) throws IOException {
    this.interactive = interactive;
    this.server = ServerBuilder.forPort(port).addService(this).build().start();
  }

  /** Serves until killed, for trying the binding by hand: {@code FakeSnowline PORT [interactive: true|false]}. */
  public static void main(String[] args) throws Exception {
    FakeSnowline f = new FakeSnowline(args.length < 2 || Boolean.parseBoolean(args[1]), Integer.parseInt(args[0]));
    System.err.println("FakeSnowline on " + f.target());
    f.server.awaitTermination();
  }

  String target() {
    return "127.0.0.1:" + server.getPort();
  }

  @Override
  public void close() {
    server.shutdownNow();
  }

  synchronized void forget(String sessionId) {
    sessions.remove(sessionId);
  }

  private static <T> void fail(StreamObserver<T> obs, Status status, String kind, String cause, String msg) {
    Metadata md = new Metadata();
    md.put(SnowlineError.ERROR_KEY, kind);
    if (cause != null) {
      md.put(SnowlineError.ABORT_CAUSE_KEY, cause);
    }
    obs.onError(status.withDescription(msg).asRuntimeException(md));
  }

  private static <T> void ok(StreamObserver<T> obs, T reply) {
    obs.onNext(reply);
    obs.onCompleted();
  }

  private <T> Session session(SessionRef ref, StreamObserver<T> obs) {
    Session s = sessions.get(ref.getId());
    if (s == null) {
      fail(obs, Status.NOT_FOUND, "unknown-session", null, "no session " + ref.getId());
    }
    return s;
  }

  private ReadResult readLocked(String key) {
    ReadResult.Builder b = ReadResult.newBuilder().setKey(key);
    String v = values.get(key);
    if (v != null) {
      b.setValue(v);
    }
    return b.build();
  }

  private void writeLocked(String key, String value) {
    values.put(key, value);
    versions.put(key, ++clock);
  }

  @Override
  public void info(InfoRequest req, StreamObserver<InfoReply> obs) {
    ok(obs, InfoReply.newBuilder().setProtocol(interactive ? "fake-occ" : "fake-causal").setLevel("ser")
        .setFamily("fake").setDcs(1).setPartitions(1).setMaxValueBytes(1 << 20).setApiVersion("v1")
        .setOffers(Offers.newBuilder().setReadOnly(true).setMultiKeyReadOnly(true).setBlindWrites(true)
            .setWriteOnlyTransactions(true).setInteractive(interactive))
        .build());
  }

  @Override
  public void openSession(OpenSessionRequest req, StreamObserver<OpenSessionReply> obs) {
    String id = "s" + nextSession.incrementAndGet();
    sessions.put(id, new Session());
    ok(obs, OpenSessionReply.newBuilder().setId(id).build());
  }

  @Override
  public void closeSession(CloseSessionRequest req, StreamObserver<CloseSessionReply> obs) {
    sessions.remove(req.getId());
    ok(obs, CloseSessionReply.getDefaultInstance());
  }

  @Override
  public void get(GetRequest req, StreamObserver<GetReply> obs) {
    ReadResult r;
    synchronized (this) {
      r = readLocked(req.getKey());
    }
    GetReply.Builder b = GetReply.newBuilder();
    if (r.hasValue()) {
      b.setValue(r.getValue());
    }
    ok(obs, b.build());
  }

  @Override
  public void put(PutRequest req, StreamObserver<PutReply> obs) {
    synchronized (this) {
      writeLocked(req.getKey(), req.getValue());
    }
    ok(obs, PutReply.getDefaultInstance());
  }

  @Override
  public void readOnly(ReadOnlyRequest req, StreamObserver<ReadOnlyReply> obs) {
    ReadOnlyReply.Builder b = ReadOnlyReply.newBuilder();
    synchronized (this) {
      for (String k : req.getKeysList()) {
        b.addReads(readLocked(k));
      }
    }
    ok(obs, b.build());
  }

  @Override
  public void writeOnly(WriteOnlyRequest req, StreamObserver<WriteOnlyReply> obs) {
    synchronized (this) {
      for (KeyValue kv : req.getWritesList()) {
        writeLocked(kv.getKey(), kv.getValue());
      }
    }
    ok(obs, WriteOnlyReply.getDefaultInstance());
  }

  @Override
  public void begin(BeginRequest req, StreamObserver<BeginReply> obs) {
    if (!interactive) {
      fail(obs, Status.UNIMPLEMENTED, "not-offered", null, "fake-causal has no interactive transactions");
      return;
    }
    Session s = session(req.getSession(), obs);
    if (s == null) {
      return;
    }
    if (s.writes != null) {
      fail(obs, Status.INVALID_ARGUMENT, "invalid-argument", null, "a transaction is already open");
      return;
    }
    s.readVersions = new HashMap<>();
    s.writes = new LinkedHashMap<>();
    ok(obs, BeginReply.getDefaultInstance());
  }

  @Override
  public void read(ReadRequest req, StreamObserver<ReadReply> obs) {
    Session s = session(req.getSession(), obs);
    if (s == null) {
      return;
    }
    ReadReply.Builder b = ReadReply.newBuilder();
    synchronized (this) {
      for (String k : req.getKeysList()) {
        if (s.writes.containsKey(k)) {
          b.addReads(ReadResult.newBuilder().setKey(k).setValue(s.writes.get(k)));
        } else {
          s.readVersions.putIfAbsent(k, versions.getOrDefault(k, 0L));
          b.addReads(readLocked(k));
        }
      }
    }
    ok(obs, b.build());
  }

  @Override
  public void write(WriteRequest req, StreamObserver<WriteReply> obs) {
    Session s = session(req.getSession(), obs);
    if (s == null) {
      return;
    }
    for (KeyValue kv : req.getWritesList()) {
      s.writes.put(kv.getKey(), kv.getValue());
    }
    ok(obs, WriteReply.getDefaultInstance());
  }

  @Override
  public void commit(CommitRequest req, StreamObserver<CommitReply> obs) {
    Session s = session(req.getSession(), obs);
    if (s == null) {
      return;
    }
    synchronized (this) {
      for (Map.Entry<String, Long> e : s.readVersions.entrySet()) {
        if (!versions.getOrDefault(e.getKey(), 0L).equals(e.getValue())) {
          s.writes = null;
          conflicts.incrementAndGet();
          fail(obs, Status.ABORTED, "conflict", "certification", e.getKey() + " changed since it was read");
          return;
        }
      }
      s.writes.forEach(this::writeLocked);
      s.writes = null;
    }
    ok(obs, CommitReply.getDefaultInstance());
  }

  @Override
  public void abort(AbortRequest req, StreamObserver<AbortReply> obs) {
    Session s = session(req.getSession(), obs);
    if (s == null) {
      return;
    }
    s.writes = null;
    ok(obs, AbortReply.getDefaultInstance());
  }
}
