package dev.snowline.ycsb;

import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;
import site.ycsb.Workload;
import site.ycsb.WorkloadException;
import site.ycsb.generator.CounterGenerator;
import site.ycsb.generator.NumberGenerator;
import site.ycsb.generator.ScrambledZipfianGenerator;
import site.ycsb.generator.UniformLongGenerator;
import site.ycsb.measurements.Measurements;

/**
 * A closed economy (the idea of YCSB+T, Dey et al. 2014): {@code recordcount} accounts, each loaded with
 * {@code closedeconomy.initial_balance}; every operation either moves a random amount between two distinct
 * random accounts (through {@link ClosedEconomyDB#transfer}: with {@link SnowlineClient} in transactional mode
 * that is ONE snowline interactive transaction) or audits one account (a plain YCSB read). Money is never made
 * or destroyed, so the sum of all balances must stay {@code recordcount * initial_balance}: after the phase,
 * {@link #cleanup} runs {@link ClosedEconomyCheck} and prints the expected and actual totals.
 *
 * <p>Design: YCSB hands a workload its DB wrapped in {@code site.ycsb.DBWrapper} (which measures the standard
 * operations), so the workload finds the wrapped DB (a field of the wrapper, by reflection) and calls
 * {@code transfer} on it when it implements {@link ClosedEconomyDB}; the transfer's latency and status are
 * reported to YCSB's measurements as operation {@code TRANSFER}. Loads and audits go through the wrapper as
 * INSERT and READ.
 *
 * <p>Properties: {@code table} (default usertable), {@code recordcount}, {@code insertstart},
 * {@code insertcount}, {@code closedeconomy.initial_balance} (1000), {@code closedeconomy.max_transfer} (100:
 * a transfer moves 1..max_transfer, at most the payer's balance), {@code closedeconomy.audit_proportion} (0.1),
 * {@code closedeconomy.requestdistribution} (uniform or zipfian), {@code closedeconomy.check} (true).
 */
public class ClosedEconomyWorkload extends Workload {
  /** The record field holding an account's balance, as decimal ASCII. */
  public static final String BALANCE_FIELD = "balance";
  public static final String TRANSFER_MEASUREMENT = "TRANSFER";

  private Properties props;
  private String table;
  private long recordCount;
  private long initialBalance;
  private long maxTransfer;
  private double auditProportion;
  private boolean check;
  private CounterGenerator keySequence;
  private NumberGenerator chooser;
  private long insertEnd;

  /** The i-th account's YCSB key. */
  public static String accountKey(long i) {
    return "account" + i;
  }

  public static byte[] balanceBytes(long balance) {
    return Long.toString(balance).getBytes(StandardCharsets.US_ASCII);
  }

  /** An account record's balance; throws IllegalArgumentException when it has none. */
  public static long balanceOf(Map<String, byte[]> record) {
    byte[] b = record.get(BALANCE_FIELD);
    if (b == null) {
      throw new IllegalArgumentException("account record without a '" + BALANCE_FIELD + "' field");
    }
    return Long.parseLong(new String(b, StandardCharsets.US_ASCII));
  }

  @Override
  public void init(Properties p) throws WorkloadException {
    props = p;
    table = p.getProperty("table", "usertable");
    recordCount = Long.parseLong(p.getProperty("recordcount", "0"));
    if (recordCount < 2) {
      throw new WorkloadException("closed economy needs recordcount >= 2 (accounts), got " + recordCount);
    }
    initialBalance = Long.parseLong(p.getProperty("closedeconomy.initial_balance", "1000"));
    maxTransfer = Math.max(1, Long.parseLong(p.getProperty("closedeconomy.max_transfer", "100")));
    auditProportion = Double.parseDouble(p.getProperty("closedeconomy.audit_proportion", "0.1"));
    check = Boolean.parseBoolean(p.getProperty("closedeconomy.check", "true"));
    long insertStart = Long.parseLong(p.getProperty(INSERT_START_PROPERTY, INSERT_START_PROPERTY_DEFAULT));
    long insertCount = Long.parseLong(p.getProperty(INSERT_COUNT_PROPERTY, String.valueOf(recordCount - insertStart)));
    insertEnd = insertStart + insertCount;
    keySequence = new CounterGenerator(insertStart);
    String dist = p.getProperty("closedeconomy.requestdistribution", "uniform");
    switch (dist) {
      case "uniform":
        chooser = new UniformLongGenerator(0, recordCount - 1);
        break;
      case "zipfian":
        chooser = new ScrambledZipfianGenerator(0, recordCount - 1);
        break;
      default:
        throw new WorkloadException("closedeconomy.requestdistribution must be uniform or zipfian, not " + dist);
    }
  }

  private static final class ThreadState {
    ClosedEconomyDB target;
  }

  @Override
  public Object initThread(Properties p, int mythreadid, int threadcount) {
    return new ThreadState();
  }

  @Override
  public boolean doInsert(DB db, Object threadstate) {
    long n = keySequence.nextValue();
    if (n >= insertEnd) {
      return false;
    }
    Map<String, ByteIterator> values = new HashMap<>();
    values.put(BALANCE_FIELD, new StringByteIterator(Long.toString(initialBalance)));
    return db.insert(table, accountKey(n), values).isOk();
  }

  @Override
  public boolean doTransaction(DB db, Object threadstate) {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    long a = chooser.nextValue().longValue();
    // YCSB stops a client thread whose doTransaction returns false: a failed operation is only reported (in the
    // measurements, as its status), and the thread goes on.
    if (rnd.nextDouble() < auditProportion) {
      Map<String, ByteIterator> result = new HashMap<>();
      db.read(table, accountKey(a), Set.of(BALANCE_FIELD), result);
      return true;
    }
    long b = chooser.nextValue().longValue();
    while (b == a) {
      b = rnd.nextLong(recordCount);
    }
    long amount = 1 + rnd.nextLong(maxTransfer);
    ThreadState st = (ThreadState) threadstate;
    if (st.target == null) {
      try {
        st.target = unwrap(db);
      } catch (IllegalStateException e) {
        System.err.println("[closedeconomy] " + e.getMessage());
        return false;
      }
    }
    long start = System.nanoTime();
    Status s = st.target.transfer(table, accountKey(a), accountKey(b), amount);
    Measurements m = Measurements.getMeasurements();
    m.measure(TRANSFER_MEASUREMENT, (int) ((System.nanoTime() - start) / 1000));
    m.reportStatus(TRANSFER_MEASUREMENT, s);
    return true;
  }

  /** The ClosedEconomyDB behind YCSB's DBWrapper (or the DB itself); fails clearly for another binding. */
  static ClosedEconomyDB unwrap(DB db) {
    Object current = db;
    for (int depth = 0; depth < 4 && current != null; depth++) {
      if (current instanceof ClosedEconomyDB) {
        return (ClosedEconomyDB) current;
      }
      Object inner = null;
      for (Class<?> c = current.getClass(); c != null && inner == null; c = c.getSuperclass()) {
        for (Field f : c.getDeclaredFields()) {
          if (DB.class.isAssignableFrom(f.getType())) {
            try {
              f.setAccessible(true);
              inner = f.get(current);
            } catch (ReflectiveOperationException | RuntimeException e) {
              inner = null;
            }
            break;
          }
        }
      }
      current = inner;
    }
    throw new IllegalStateException("the closed-economy workload needs a DB that implements "
        + ClosedEconomyDB.class.getName() + " (-db dev.snowline.ycsb.SnowlineClient); got " + db.getClass().getName());
  }

  @Override
  public void cleanup() throws WorkloadException {
    if (SnowlineClient.STATS.committed.sum() + SnowlineClient.STATS.abortedAttempts.sum() > 0) {
      System.err.println("[closedeconomy] aborts: " + SnowlineClient.STATS.summary());
    }
    if (!check) {
      return;
    }
    try {
      ClosedEconomyCheck.Result r = ClosedEconomyCheck.run(props);
      System.out.println(r.report());
    } catch (RuntimeException e) {
      System.err.println("[closedeconomy] the check failed to run: " + e);
    }
  }
}
