package dev.snowline.ycsb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.htrace.core.HTraceConfiguration;
import org.apache.htrace.core.Tracer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBWrapper;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;
import site.ycsb.measurements.Measurements;

/** SnowlineClient against {@link FakeSnowline} over real gRPC on the loopback. */
class SnowlineClientTest {
  @BeforeAll
  static void measurements() {
    Measurements.setProperties(new Properties());
  }

  private static SnowlineClient client(String target, boolean transactional) throws Exception {
    Properties p = new Properties();
    p.setProperty(SnowlineClient.TARGET_PROPERTY, target);
    p.setProperty(SnowlineClient.TRANSACTIONAL_PROPERTY, String.valueOf(transactional));
    p.setProperty(SnowlineClient.RETRIES_PROPERTY, "1000");
    p.setProperty(SnowlineClient.DEADLINE_PROPERTY, "5000");
    SnowlineClient c = new SnowlineClient();
    c.setProperties(p);
    c.init();
    return c;
  }

  private static Map<String, ByteIterator> fields(String... kv) {
    Map<String, ByteIterator> m = new HashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], new StringByteIterator(kv[i + 1]));
    }
    return m;
  }

  private static Map<String, String> asStrings(Map<String, ByteIterator> m) {
    Map<String, String> out = new HashMap<>();
    m.forEach((k, v) -> out.put(k, v.toString()));
    return out;
  }

  private static void crud(boolean transactional) throws Exception {
    try (FakeSnowline fake = new FakeSnowline(true)) {
      SnowlineClient c = client(fake.target(), transactional);
      Map<String, ByteIterator> out = new HashMap<>();
      assertSame(Status.NOT_FOUND, c.read("usertable", "user1", null, out));
      assertSame(Status.NOT_FOUND, c.update("usertable", "user1", fields("f0", "x")));
      assertSame(Status.OK, c.insert("usertable", "user1", fields("f0", "a", "f1", "b")));
      assertSame(Status.OK, c.update("usertable", "user1", fields("f1", "B", "f2", "c")));
      assertSame(Status.OK, c.read("usertable", "user1", null, out));
      assertEquals(Map.of("f0", "a", "f1", "B", "f2", "c"), asStrings(out));
      out.clear();
      assertSame(Status.OK, c.read("usertable", "user1", Set.of("f2"), out));
      assertEquals(Map.of("f2", "c"), asStrings(out));
      assertSame(Status.NOT_IMPLEMENTED, c.scan("usertable", "user1", 10, null, new Vector<>()));
      assertSame(Status.OK, c.delete("usertable", "user1"));
      assertSame(Status.NOT_FOUND, c.read("usertable", "user1", null, new HashMap<>()));
      // a forgotten session is reopened
      c.cleanup();
    }
  }

  @Test
  void crudNonTransactional() throws Exception {
    crud(false);
  }

  @Test
  void crudTransactional() throws Exception {
    crud(true);
  }

  @Test
  void transactionalModeOnAProtocolWithoutInteractiveTransactions() throws Exception {
    try (FakeSnowline fake = new FakeSnowline(false)) {
      SnowlineClient c = client(fake.target(), true);
      assertSame(Status.NOT_IMPLEMENTED, c.insert("usertable", "k", fields("f", "v")));
      c.cleanup();
    }
  }

  private static long runEconomy(boolean transactional, FakeSnowline fake) throws Exception {
    int accounts = 5;
    Properties p = new Properties();
    p.setProperty(SnowlineClient.TARGET_PROPERTY, fake.target());
    p.setProperty("recordcount", String.valueOf(accounts));
    p.setProperty("table", "accounts");
    SnowlineClient loader = client(fake.target(), transactional);
    for (int i = 0; i < accounts; i++) {
      assertSame(Status.OK, loader.insert("accounts", ClosedEconomyWorkload.accountKey(i),
          fields(ClosedEconomyWorkload.BALANCE_FIELD, "1000")));
    }
    loader.cleanup();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      SnowlineClient c = client(fake.target(), transactional);
      threads.add(new Thread(() -> {
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        for (int n = 0; n < 150; n++) {
          int a = rnd.nextInt(accounts);
          int b = (a + 1 + rnd.nextInt(accounts - 1)) % accounts;
          c.transfer("accounts", ClosedEconomyWorkload.accountKey(a), ClosedEconomyWorkload.accountKey(b),
              1 + rnd.nextInt(100));
        }
        try {
          c.cleanup();
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      }));
    }
    threads.forEach(Thread::start);
    for (Thread t : threads) {
      t.join();
    }
    ClosedEconomyCheck.Result r = ClosedEconomyCheck.run(p);
    assertEquals(5000, r.expected);
    assertEquals(0, r.missing);
    return r.actual;
  }

  @Test
  void closedEconomyIsConservedInTransactionalMode() throws Exception {
    try (FakeSnowline fake = new FakeSnowline(true)) {
      assertEquals(5000, runEconomy(true, fake));
      assertTrue(fake.conflicts.get() > 0, "4 threads on 5 accounts should conflict");
    }
  }

  @Test
  void closedEconomyRunsNonTransactionally() throws Exception {
    try (FakeSnowline fake = new FakeSnowline(true)) {
      runEconomy(false, fake); // the total may drift: transfers are not isolated
    }
  }

  @Test
  void workloadFindsTheClientBehindYcsbsWrapper() throws Exception {
    SnowlineClient inner = new SnowlineClient();
    DB wrapped = new DBWrapper(inner, new Tracer.Builder("test").conf(HTraceConfiguration.EMPTY).build());
    assertSame(inner, ClosedEconomyWorkload.unwrap(wrapped));
  }
}
