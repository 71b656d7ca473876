package dev.snowline.ycsb;

import com.google.protobuf.ByteString;
import dev.snowline.v1.AbortRequest;
import dev.snowline.v1.BeginRequest;
import dev.snowline.v1.CloseSessionRequest;
import dev.snowline.v1.CommitReply;
import dev.snowline.v1.CommitRequest;
import dev.snowline.v1.GetReply;
import dev.snowline.v1.GetRequest;
import dev.snowline.v1.KeyValue;
import dev.snowline.v1.Meta;
import dev.snowline.v1.OpenSessionReply;
import dev.snowline.v1.OpenSessionRequest;
import dev.snowline.v1.PutRequest;
import dev.snowline.v1.ReadOnlyReply;
import dev.snowline.v1.ReadOnlyRequest;
import dev.snowline.v1.ReadReply;
import dev.snowline.v1.ReadRequest;
import dev.snowline.v1.ReadResult;
import dev.snowline.v1.SessionRef;
import dev.snowline.v1.SnowlineGrpc;
import dev.snowline.v1.WriteOnlyRequest;
import dev.snowline.v1.WriteRequest;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.measurements.Measurements;

/**
 * YCSB binding for snowline, over its gRPC API (proto/snowline/v1/snowline.proto).
 *
 * <p>Properties: {@code snowline.target} (required: {@code host:port[,host:port...]}; the i-th DB instance to
 * initialise, i.e. roughly client thread i, uses target i mod n), {@code snowline.deadline_ms} (per call,
 * default 15000: above the endpoints' own op timeout, 10 s, so their answer comes first), {@code snowline.transactional} (default false), {@code snowline.retries} (conflict aborts
 * retried per operation in transactional mode, default 10), {@code snowline.table_prefix} (default true: the
 * snowline key is {@code table:key}), {@code snowline.tls_ca} (unset: plain TCP; else TLS, verifying the
 * endpoint against this CA certificate file, the cluster's DIR/tls/ca.pem).
 *
 * <p>Each DB instance opens one snowline session in {@link #init} and closes it in {@link #cleanup}. Records are
 * encoded by {@link RecordCodec}; a delete writes {@link RecordCodec#TOMBSTONE}. Scans answer NOT_IMPLEMENTED.
 */
public class SnowlineClient extends DB implements ClosedEconomyDB {
  public static final String TARGET_PROPERTY = "snowline.target";
  public static final String DEADLINE_PROPERTY = "snowline.deadline_ms";
  public static final String TRANSACTIONAL_PROPERTY = "snowline.transactional";
  public static final String RETRIES_PROPERTY = "snowline.retries";
  public static final String TABLE_PREFIX_PROPERTY = "snowline.table_prefix";
  public static final String TLS_CA_PROPERTY = "snowline.tls_ca";

  /** The measurement (in YCSB's report) of transaction attempts that aborted, with their latency. */
  public static final String ABORT_MEASUREMENT = "TX-ABORTED";

  private static final AtomicInteger NEXT_INSTANCE = new AtomicInteger();
  private static final AtomicInteger LIVE = new AtomicInteger();

  /** Transaction counts of every SnowlineClient in this JVM. */
  public static final Stats STATS = new Stats();

  private Endpoint endpoint;
  private long deadlineMs;
  private boolean transactional;
  private int retries;
  private boolean tablePrefix;
  private String sessionId = "";
  private ByteString sessionToken = ByteString.EMPTY;

  /** Counts of transactions and their aborts. */
  public static final class Stats {
    public final LongAdder committed = new LongAdder();
    public final LongAdder abortedAttempts = new LongAdder();
    public final LongAdder retried = new LongAdder();
    public final LongAdder gaveUp = new LongAdder();
    public final Map<String, LongAdder> abortsByCause = new ConcurrentHashMap<>();

    void abort(String cause) {
      abortedAttempts.increment();
      abortsByCause.computeIfAbsent(cause == null ? "(none)" : cause, c -> new LongAdder()).increment();
    }

    public String summary() {
      StringBuilder sb = new StringBuilder();
      sb.append("transactions committed ").append(committed.sum())
          .append(", aborted attempts ").append(abortedAttempts.sum());
      if (!abortsByCause.isEmpty()) {
        sb.append(" (by snowline-abort-cause: ");
        boolean first = true;
        for (Map.Entry<String, LongAdder> e : new TreeMap<>(abortsByCause).entrySet()) {
          if (!first) {
            sb.append(", ");
          }
          first = false;
          sb.append(e.getKey()).append(' ').append(e.getValue().sum());
        }
        sb.append(')');
      }
      sb.append(", retried ").append(retried.sum())
          .append(", given up after snowline.retries ").append(gaveUp.sum());
      return sb.toString();
    }
  }

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String targets = p.getProperty(TARGET_PROPERTY, "").trim();
    List<String> list = new ArrayList<>();
    for (String t : targets.split(",")) {
      if (!t.isBlank()) {
        list.add(t.trim());
      }
    }
    if (list.isEmpty()) {
      throw new DBException(TARGET_PROPERTY + " is not set: give -p " + TARGET_PROPERTY
          + "=host:port[,host:port...] (the grpc entries of the cluster's cluster.toml)");
    }
    int index = NEXT_INSTANCE.getAndIncrement();
    String target = list.get(index % list.size());
    deadlineMs = Long.parseLong(p.getProperty(DEADLINE_PROPERTY, "15000"));
    transactional = Boolean.parseBoolean(p.getProperty(TRANSACTIONAL_PROPERTY, "false"));
    retries = Integer.parseInt(p.getProperty(RETRIES_PROPERTY, "10"));
    tablePrefix = Boolean.parseBoolean(p.getProperty(TABLE_PREFIX_PROPERTY, "true"));

    endpoint = Endpoint.acquire(target, deadlineMs, p.getProperty(TLS_CA_PROPERTY));
    LIVE.incrementAndGet();
    if (transactional) {
      SnowlineError.logOnce("mode", "snowline.transactional=true: every YCSB operation is one interactive "
          + "transaction (Begin, Read, Write, Commit); conflict aborts are retried up to " + retries + " times");
      if (endpoint.info != null && !endpoint.info.getOffers().getInteractive()) {
        SnowlineError.logOnce("nointeractive:" + target, "protocol " + endpoint.info.getProtocol() + " ("
            + endpoint.info.getLevel() + ") OFFERS NO INTERACTIVE TRANSACTIONS: with snowline.transactional=true "
            + "every operation's Begin is answered not-offered and YCSB counts it NOT_IMPLEMENTED; run this "
            + "protocol with -p snowline.transactional=false");
      }
    } else {
      SnowlineError.logOnce("mode", "snowline.transactional=false: a read is one Get, an insert or delete one Put, "
          + "an update a Get then a Put (NOT atomic: concurrent updates of one record can lose fields)");
      if (endpoint.info != null && !endpoint.info.getOffers().getBlindWrites()) {
        SnowlineError.logOnce("noput:" + target, "protocol " + endpoint.info.getProtocol() + " OFFERS NO BLIND "
            + "WRITES (Put): with snowline.transactional=false inserts, updates and deletes are answered not-offered "
            + "(NOT_IMPLEMENTED); run it with -p snowline.transactional=true");
      }
      if (endpoint.info != null && !endpoint.info.getOffers().getReadOnly()) {
        SnowlineError.logOnce("noget:" + target, "protocol " + endpoint.info.getProtocol() + " OFFERS NO READ-ONLY "
            + "Get: with snowline.transactional=false reads are answered not-offered (NOT_IMPLEMENTED); run it with "
            + "-p snowline.transactional=true");
      }
    }
    try {
      openSession(ByteString.EMPTY);
    } catch (StatusRuntimeException e) {
      SnowlineError err = SnowlineError.of(e);
      err.logFirst("OpenSession");
      LIVE.decrementAndGet();
      endpoint.release();
      throw new DBException("OpenSession on " + target + " failed: " + err, e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (endpoint == null) {
      return;
    }
    try {
      if (!sessionId.isEmpty()) {
        stub().closeSession(CloseSessionRequest.newBuilder().setId(sessionId).build());
      }
    } catch (StatusRuntimeException e) {
      SnowlineError.of(e).logFirst("CloseSession");
    } finally {
      endpoint.release();
      endpoint = null;
      if (LIVE.decrementAndGet() == 0 && (transactional || STATS.abortedAttempts.sum() > 0)) {
        System.err.println("[snowline] " + STATS.summary());
      }
    }
  }

  // ---- the operations

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    String k = storageKey(table, key);
    if (transactional) {
      return runTransaction("read", true, () -> fill(readInTx(List.of(k)).get(k), fields, result));
    }
    return call("read", () -> {
      GetReply r = stub().get(GetRequest.newBuilder().setSession(session()).setKey(k).build());
      track(r.getMeta());
      return fill(r.hasValue() ? r.getValue() : null, fields, result);
    });
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    SnowlineError.logOnce("scan", "scan: snowline protocols have no range reads; every scan answers NOT_IMPLEMENTED");
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    String k = storageKey(table, key);
    Map<String, byte[]> changes = toBytes(values);
    if (transactional) {
      return runTransaction("update", false, () -> {
        Map<String, byte[]> record = decodeOrNull(readInTx(List.of(k)).get(k));
        if (record == null) {
          return Status.NOT_FOUND;
        }
        record.putAll(changes);
        writeInTx(Map.of(k, RecordCodec.encode(record)));
        return Status.OK;
      });
    }
    return call("update", () -> {
      GetReply r = stub().get(GetRequest.newBuilder().setSession(session()).setKey(k).build());
      track(r.getMeta());
      Map<String, byte[]> record = decodeOrNull(r.hasValue() ? r.getValue() : null);
      if (record == null) {
        return Status.NOT_FOUND;
      }
      record.putAll(changes);
      put(k, RecordCodec.encode(record));
      return Status.OK;
    });
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    String k = storageKey(table, key);
    String v = RecordCodec.encode(toBytes(values));
    checkSize(v);
    if (transactional) {
      return runTransaction("insert", false, () -> {
        readInTx(List.of(k)); // see readBeforeWrite
        writeInTx(Map.of(k, v));
        return Status.OK;
      });
    }
    return call("insert", () -> {
      put(k, v);
      return Status.OK;
    });
  }

  @Override
  public Status delete(String table, String key) {
    String k = storageKey(table, key);
    if (transactional) {
      return runTransaction("delete", false, () -> {
        readInTx(List.of(k)); // see readBeforeWrite
        writeInTx(Map.of(k, RecordCodec.TOMBSTONE));
        return Status.OK;
      });
    }
    return call("delete", () -> {
      put(k, RecordCodec.TOMBSTONE);
      return Status.OK;
    });
  }

  @Override
  public Status transfer(String table, String from, String to, long amount) {
    String kf = storageKey(table, from);
    String kt = storageKey(table, to);
    if (transactional) {
      return runTransaction("transfer", false, () -> {
        Map<String, String> got = readInTx(List.of(kf, kt));
        Map<String, String> writes = moveMoney(got.get(kf), got.get(kt), kf, kt, amount);
        if (writes == null) {
          return Status.NOT_FOUND;
        }
        writeInTx(writes);
        return Status.OK;
      });
    }
    // Not isolated: the two reads and the writes are separate calls, so concurrent transfers can lose updates.
    return call("transfer", () -> {
      Map<String, String> got = new HashMap<>();
      if (endpoint.offersMultiKeyReadOnly()) {
        ReadOnlyReply r = stub().readOnly(ReadOnlyRequest.newBuilder().setSession(session())
            .addKeys(kf).addKeys(kt).build());
        track(r.getMeta());
        collect(r.getReadsList(), got);
      } else {
        for (String k : List.of(kf, kt)) {
          GetReply r = stub().get(GetRequest.newBuilder().setSession(session()).setKey(k).build());
          track(r.getMeta());
          got.put(k, r.hasValue() ? r.getValue() : null);
        }
      }
      Map<String, String> writes = moveMoney(got.get(kf), got.get(kt), kf, kt, amount);
      if (writes == null) {
        return Status.NOT_FOUND;
      }
      if (endpoint.offersWriteOnly()) {
        WriteOnlyRequest.Builder w = WriteOnlyRequest.newBuilder().setSession(session());
        writes.forEach((k, v) -> w.addWrites(KeyValue.newBuilder().setKey(k).setValue(v)));
        track(stub().writeOnly(w.build()).getMeta());
      } else {
        for (Map.Entry<String, String> e : writes.entrySet()) {
          put(e.getKey(), e.getValue());
        }
      }
      return Status.OK;
    });
  }

  /** The writes of a transfer, or null when an account is missing. */
  private static Map<String, String> moveMoney(String fromValue, String toValue, String kf, String kt, long amount) {
    Map<String, byte[]> a = decodeOrNull(fromValue);
    Map<String, byte[]> b = decodeOrNull(toValue);
    if (a == null || b == null) {
      return null;
    }
    long fromBalance = ClosedEconomyWorkload.balanceOf(a);
    long toBalance = ClosedEconomyWorkload.balanceOf(b);
    long moved = Math.max(0, Math.min(amount, fromBalance));
    a.put(ClosedEconomyWorkload.BALANCE_FIELD, ClosedEconomyWorkload.balanceBytes(fromBalance - moved));
    b.put(ClosedEconomyWorkload.BALANCE_FIELD, ClosedEconomyWorkload.balanceBytes(toBalance + moved));
    Map<String, String> writes = new TreeMap<>();
    writes.put(kf, RecordCodec.encode(a));
    writes.put(kt, RecordCodec.encode(b));
    return writes;
  }

  // ---- calls, sessions, transactions

  /** The snowline key of a YCSB key: {@code table:key}, or the key alone with snowline.table_prefix=false. */
  public static String storageKey(String table, String key, boolean tablePrefix) {
    return tablePrefix ? table + ":" + key : key;
  }

  private String storageKey(String table, String key) {
    return storageKey(table, key, tablePrefix);
  }

  private SnowlineGrpc.SnowlineBlockingStub stub() {
    return endpoint.stub(deadlineMs);
  }

  private SessionRef session() {
    return SessionRef.newBuilder().setId(sessionId).build();
  }

  private void openSession(ByteString token) {
    OpenSessionReply r = stub().openSession(OpenSessionRequest.newBuilder().setToken(token).build());
    sessionId = r.getId();
    sessionToken = r.getToken();
    if (sessionId.isEmpty()) {
      SnowlineError.logOnce("defect:empty-session", "SERVER DEFECT? OpenSession answered an empty session id");
    }
  }

  /** Reopens the session from its last token after the endpoint forgot it (idle sessions close on their own). */
  private void reopenSession(SnowlineError why) {
    SnowlineError.logOnce("reopen", "the endpoint no longer knows a session (" + why
        + "); reopening it from its last token (logged once)");
    openSession(sessionToken);
  }

  private void track(Meta meta) {
    if (meta != null && !meta.getSessionToken().isEmpty()) {
      sessionToken = meta.getSessionToken();
    }
  }

  private void put(String key, String value) {
    track(stub().put(PutRequest.newBuilder().setSession(session()).setKey(key).setValue(value).build()).getMeta());
  }

  @FunctionalInterface
  private interface Body {
    Status run();
  }

  /** Runs one non-transactional operation, mapping a failure to its YCSB status. */
  private Status call(String name, Body body) {
    boolean reopened = false;
    while (true) {
      try {
        return body.run();
      } catch (IllegalArgumentException bad) {
        return badRecord(bad);
      } catch (StatusRuntimeException e) {
        SnowlineError err = SnowlineError.of(e);
        if (err.isUnknownSession() && !reopened) {
          reopened = true;
          try {
            reopenSession(err);
            continue;
          } catch (StatusRuntimeException again) {
            err = SnowlineError.of(again);
          }
        }
        if (err.isAbort()) {
          STATS.abort(err.cause);
        }
        err.logFirst(name);
        return err.toYcsb();
      }
    }
  }

  /**
   * Runs {@code body} inside one interactive transaction: Begin, the body's Reads and Writes, Commit. The body's
   * status decides: OK commits; NOT_FOUND commits a read-only operation (it read nothing) and aborts another
   * one (it wrote nothing). A conflict abort runs the whole transaction again, up to snowline.retries times.
   */
  private Status runTransaction(String name, boolean readOnly, Body body) {
    boolean reopened = false;
    int attempt = 0;
    while (true) {
      long start = System.nanoTime();
      boolean open = false;
      try {
        begin();
        open = true;
        Status s = body.run();
        if (s.isOk() || (readOnly && s == Status.NOT_FOUND)) {
          CommitReply c = stub().commit(CommitRequest.newBuilder().setSession(session()).build());
          open = false;
          track(c.getMeta());
          STATS.committed.increment();
          return s;
        }
        open = false;
        abortQuietly();
        return s;
      } catch (IllegalArgumentException bad) {
        if (open) {
          abortQuietly();
        }
        return badRecord(bad);
      } catch (StatusRuntimeException e) {
        SnowlineError err = SnowlineError.of(e);
        if (err.isAbort()) {
          STATS.abort(err.cause);
          Measurements.getMeasurements().measure(ABORT_MEASUREMENT, (int) ((System.nanoTime() - start) / 1000));
          err.logFirst(name);
          if (err.isRetryable() && attempt < retries) {
            attempt++;
            STATS.retried.increment();
            continue;
          }
          if (err.isRetryable()) {
            STATS.gaveUp.increment();
          }
          return Status.ERROR;
        }
        if (err.isUnknownSession() && !reopened) {
          reopened = true;
          try {
            reopenSession(err);
            continue;
          } catch (StatusRuntimeException again) {
            err = SnowlineError.of(again);
          }
        }
        err.logFirst(name);
        if (open && !"outcome-unknown".equals(err.kind)) {
          abortQuietly();
        }
        return err.toYcsb();
      }
    }
  }

  private void begin() {
    BeginRequest req = BeginRequest.newBuilder().setSession(session()).build();
    try {
      track(stub().begin(req).getMeta());
    } catch (StatusRuntimeException e) {
      SnowlineError err = SnowlineError.of(e);
      if (!"invalid-argument".equals(err.kind)) {
        throw e;
      }
      // A session has at most one open transaction: say so loudly if one was left open, then start afresh.
      SnowlineError.logOnce("begin-open", "Begin answered " + err + "; sending Abort and beginning again (logged "
          + "once; if this follows an abort, the server left the aborted transaction open: a server-side defect)");
      abortQuietly();
      track(stub().begin(req).getMeta());
    }
  }

  private void abortQuietly() {
    try {
      stub().abort(AbortRequest.newBuilder().setSession(session()).build());
    } catch (StatusRuntimeException e) {
      SnowlineError.logOnce("abort:" + SnowlineError.of(e).logKey(), "Abort failed (ignored, logged once): "
          + SnowlineError.of(e));
    }
  }

  /**
   * Reads keys inside the open transaction: key to value (null when never written).
   *
   * <p>readBeforeWrite: in transactional mode an insert or a delete reads its key before writing it, so every
   * operation is Begin, Read, Write, Commit: the Jessy-family protocols (nmsi, ...) take no blind writes in a
   * transaction (a transaction must read each key it writes).
   */
  private Map<String, String> readInTx(List<String> keys) {
    ReadReply r = stub().read(ReadRequest.newBuilder().setSession(session()).addAllKeys(keys).build());
    track(r.getMeta());
    Map<String, String> got = new HashMap<>();
    collect(r.getReadsList(), got);
    for (String k : keys) {
      if (!got.containsKey(k)) {
        SnowlineError.logOnce("defect:read-missing-key", "SERVER DEFECT? Read of " + keys + " answered no result for "
            + k + " (treated as never written)");
      }
    }
    return got;
  }

  private static void collect(List<ReadResult> reads, Map<String, String> into) {
    for (ReadResult rr : reads) {
      into.put(rr.getKey(), rr.hasValue() ? rr.getValue() : null);
    }
  }

  private void writeInTx(Map<String, String> writes) {
    WriteRequest.Builder w = WriteRequest.newBuilder().setSession(session());
    writes.forEach((k, v) -> w.addWrites(KeyValue.newBuilder().setKey(k).setValue(v)));
    stub().write(w.build());
  }

  // ---- records

  private static Map<String, byte[]> toBytes(Map<String, ByteIterator> values) {
    Map<String, byte[]> out = new HashMap<>();
    values.forEach((k, v) -> out.put(k, v.toArray()));
    return out;
  }

  /** The decoded record of a stored value; null for never written or deleted. */
  private static Map<String, byte[]> decodeOrNull(String value) {
    if (value == null) {
      return null;
    }
    return RecordCodec.decode(value);
  }

  private static Status badRecord(IllegalArgumentException bad) {
    SnowlineError.logOnce("badrecord", "a stored value is not a YCSB record (answered UNEXPECTED_STATE, logged "
        + "once): " + bad.getMessage());
    return Status.UNEXPECTED_STATE;
  }

  private static Status fill(String value, Set<String> fields, Map<String, ByteIterator> result) {
    Map<String, byte[]> record = decodeOrNull(value);
    if (record == null) {
      return Status.NOT_FOUND;
    }
    for (Map.Entry<String, byte[]> e : record.entrySet()) {
      if (fields == null || fields.contains(e.getKey())) {
        result.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
      }
    }
    return Status.OK;
  }

  private void checkSize(String value) {
    if (endpoint.info != null && endpoint.info.getMaxValueBytes() > 0
        && value.length() > endpoint.info.getMaxValueBytes()) {
      SnowlineError.logOnce("toolarge", "an encoded record is " + value.length() + " bytes, over the endpoint's "
          + "max_value_bytes " + endpoint.info.getMaxValueBytes() + " (sent anyway; lower fieldcount/fieldlength)");
    }
  }
}
