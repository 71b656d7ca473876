package dev.snowline.ycsb;

import dev.snowline.v1.BeginRequest;
import dev.snowline.v1.CloseSessionRequest;
import dev.snowline.v1.CommitRequest;
import dev.snowline.v1.GetReply;
import dev.snowline.v1.GetRequest;
import dev.snowline.v1.OpenSessionRequest;
import dev.snowline.v1.ReadOnlyRequest;
import dev.snowline.v1.ReadReply;
import dev.snowline.v1.ReadRequest;
import dev.snowline.v1.ReadResult;
import dev.snowline.v1.SessionRef;
import io.grpc.StatusRuntimeException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Checks a closed economy: reads every account and compares the sum of the balances with
 * {@code recordcount * closedeconomy.initial_balance}. The accounts are read in ONE read-only transaction
 * (ReadOnly) where the protocol offers multi-key read-only transactions (in several of at most
 * {@code closedeconomy.check_batch} keys, 10000 by default, the servers' max_keys_per_request, when there are
 * more accounts: the check runs after the transfers stopped, so the sum is still exact), else in one interactive transaction
 * (Begin, Read, Commit) where it offers those, else key by key with Get (then the sum is not of one snapshot,
 * and the report says so).
 *
 * <p>Standalone: {@code java -cp ... dev.snowline.ycsb.ClosedEconomyCheck [-P workloadfile] [-p name=value]...}
 * with the same properties as the run (snowline.target, recordcount, table, snowline.table_prefix,
 * closedeconomy.initial_balance, snowline.deadline_ms). Exits 0 when the total is conserved, 1 when not, 2 when
 * it could not read.
 */
public final class ClosedEconomyCheck {
  private ClosedEconomyCheck() {}

  /** What the check found. */
  public static final class Result {
    public long accounts;
    public long expected;
    public long actual;
    public long missing;
    public long malformed;
    public String how;
    public String protocol;

    public boolean conserved() {
      return missing == 0 && malformed == 0 && expected == actual;
    }

    public String report() {
      return "[closedeconomy] " + (protocol == null ? "" : "protocol " + protocol + ", ") + accounts + " accounts read "
          + how + ": expected total " + expected + ", actual total " + actual
          + (missing > 0 ? ", missing accounts " + missing : "")
          + (malformed > 0 ? ", malformed accounts " + malformed : "")
          + ", conserved: " + (conserved() ? "YES" : "NO (off by " + (actual - expected) + ")");
    }
  }

  /** Runs the check with the run's properties. */
  public static Result run(Properties p) {
    String target = p.getProperty(SnowlineClient.TARGET_PROPERTY, "").split(",")[0].trim();
    if (target.isEmpty()) {
      throw new IllegalArgumentException(SnowlineClient.TARGET_PROPERTY + " is not set");
    }
    long deadlineMs = Long.parseLong(p.getProperty(SnowlineClient.DEADLINE_PROPERTY, "15000"));
    long recordCount = Long.parseLong(p.getProperty("recordcount", "0"));
    long initial = Long.parseLong(p.getProperty("closedeconomy.initial_balance", "1000"));
    String table = p.getProperty("table", "usertable");
    boolean prefix = Boolean.parseBoolean(p.getProperty(SnowlineClient.TABLE_PREFIX_PROPERTY, "true"));
    // The servers take at most max_keys_per_request (cluster.toml, 10000 by default) keys in one request.
    int batch = Math.max(1, Integer.parseInt(p.getProperty("closedeconomy.check_batch", "10000")));
    List<String> keys = new ArrayList<>();
    for (long i = 0; i < recordCount; i++) {
      keys.add(SnowlineClient.storageKey(table, ClosedEconomyWorkload.accountKey(i), prefix));
    }
    Result r = new Result();
    r.accounts = recordCount;
    r.expected = recordCount * initial;
    Endpoint ep = Endpoint.acquire(target, deadlineMs, p.getProperty(SnowlineClient.TLS_CA_PROPERTY));
    // The whole read may be big: give it a longer deadline than one operation.
    long longDeadline = Math.max(deadlineMs, 60_000);
    try {
      r.protocol = ep.info == null ? null : ep.info.getProtocol();
      Map<String, ReadResult> got = new HashMap<>();
      if (ep.info == null || ep.info.getOffers().getMultiKeyReadOnly()) {
        int chunks = (keys.size() + batch - 1) / batch;
        r.how = chunks <= 1 ? "in one read-only transaction (ReadOnly)"
            : "in " + chunks + " read-only transactions of at most " + batch + " keys (closedeconomy.check_batch; "
                + "one snapshot each, exact once the transfers have stopped)";
        for (int from = 0; from < keys.size(); from += batch) {
          List<String> part = keys.subList(from, Math.min(keys.size(), from + batch));
          for (ReadResult rr : ep.stub(longDeadline).readOnly(ReadOnlyRequest.newBuilder()
              .setSession(SessionRef.getDefaultInstance()).addAllKeys(part).build()).getReadsList()) {
            got.put(rr.getKey(), rr);
          }
        }
      } else if (ep.info.getOffers().getInteractive()) {
        r.how = "in one interactive transaction (Begin, Read, Commit)";
        String id = ep.stub(deadlineMs).openSession(OpenSessionRequest.getDefaultInstance()).getId();
        SessionRef s = SessionRef.newBuilder().setId(id).build();
        try {
          ep.stub(deadlineMs).begin(BeginRequest.newBuilder().setSession(s).build());
          ReadReply rep = ep.stub(longDeadline).read(ReadRequest.newBuilder().setSession(s).addAllKeys(keys).build());
          ep.stub(deadlineMs).commit(CommitRequest.newBuilder().setSession(s).build());
          for (ReadResult rr : rep.getReadsList()) {
            got.put(rr.getKey(), rr);
          }
        } finally {
          try {
            ep.stub(deadlineMs).closeSession(CloseSessionRequest.newBuilder().setId(id).build());
          } catch (StatusRuntimeException ignored) {
            // best effort
          }
        }
      } else {
        r.how = "key by key with Get (the protocol offers no multi-key read transaction: NOT one snapshot)";
        for (String k : keys) {
          GetReply g = ep.stub(deadlineMs).get(GetRequest.newBuilder().setSession(SessionRef.getDefaultInstance())
              .setKey(k).build());
          ReadResult.Builder b = ReadResult.newBuilder().setKey(k);
          if (g.hasValue()) {
            b.setValue(g.getValue());
          }
          got.put(k, b.build());
        }
      }
      for (String k : keys) {
        ReadResult rr = got.get(k);
        if (rr == null || !rr.hasValue() || RecordCodec.isTombstone(rr.getValue())) {
          r.missing++;
          continue;
        }
        try {
          r.actual += ClosedEconomyWorkload.balanceOf(RecordCodec.decode(rr.getValue()));
        } catch (IllegalArgumentException bad) {
          r.malformed++;
        }
      }
      return r;
    } catch (StatusRuntimeException e) {
      SnowlineError err = SnowlineError.of(e);
      err.logFirst("closed-economy check");
      throw new IllegalStateException("reading the accounts failed: " + err, e);
    } finally {
      ep.release();
    }
  }

  public static void main(String[] args) throws IOException {
    Properties p = new Properties();
    for (int i = 0; i < args.length; i++) {
      if ("-P".equals(args[i]) && i + 1 < args.length) {
        try (InputStream in = new FileInputStream(args[++i])) {
          Properties f = new Properties();
          f.load(in);
          f.forEach((k, v) -> p.putIfAbsent(k, v));
        }
      } else if ("-p".equals(args[i]) && i + 1 < args.length) {
        String kv = args[++i];
        int eq = kv.indexOf('=');
        if (eq < 0) {
          System.err.println("bad -p " + kv + " (want name=value)");
          System.exit(2);
        }
        p.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
      } else {
        System.err.println("usage: ClosedEconomyCheck [-P workloadfile] [-p name=value]...");
        System.exit(2);
      }
    }
    try {
      Result r = run(p);
      System.out.println(r.report());
      System.exit(r.conserved() ? 0 : 1);
    } catch (RuntimeException e) {
      System.err.println("[closedeconomy] " + e.getMessage());
      System.exit(2);
    }
  }
}
