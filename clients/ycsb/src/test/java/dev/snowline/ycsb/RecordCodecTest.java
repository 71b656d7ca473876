package dev.snowline.ycsb;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class RecordCodecTest {
  @Test
  void roundTripsArbitraryBytesAndNames() {
    Random rnd = new Random(42);
    for (int n = 0; n < 200; n++) {
      Map<String, byte[]> rec = new HashMap<>();
      int fields = rnd.nextInt(12);
      for (int f = 0; f < fields; f++) {
        byte[] v = new byte[rnd.nextInt(130)];
        rnd.nextBytes(v);
        String name = f % 3 == 0 ? "field" + f : "f,:|~é" + f + "\u00e9\ud83d\ude00";
        rec.put(name, v);
      }
      String enc = RecordCodec.encode(rec);
      assertTrue(enc.startsWith(RecordCodec.RECORD_PREFIX));
      Map<String, byte[]> dec = RecordCodec.decode(enc);
      assertEquals(rec.keySet(), dec.keySet());
      for (String k : rec.keySet()) {
        assertArrayEquals(rec.get(k), dec.get(k), k);
      }
    }
  }

  @Test
  void knownEncodingAndEmptyRecord() {
    Map<String, byte[]> rec = new HashMap<>();
    rec.put("field0", "ab".getBytes(StandardCharsets.US_ASCII));
    assertEquals("y1|ZmllbGQw:YWI=", RecordCodec.encode(rec));
    assertEquals("y1|", RecordCodec.encode(new HashMap<>()));
    assertTrue(RecordCodec.decode("y1|").isEmpty());
    Map<String, byte[]> empty = new HashMap<>();
    empty.put("e", new byte[0]);
    assertArrayEquals(new byte[0], RecordCodec.decode(RecordCodec.encode(empty)).get("e"));
  }

  @Test
  void tombstoneIsNotARecord() {
    assertTrue(RecordCodec.isTombstone(RecordCodec.TOMBSTONE));
    assertNull(RecordCodec.decode(RecordCodec.TOMBSTONE));
    assertTrue(!RecordCodec.isTombstone(RecordCodec.encode(new HashMap<>())));
  }

  @Test
  void rejectsForeignValues() {
    assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode("hello"));
    assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode("y1|abc"));
    assertThrows(IllegalArgumentException.class, () -> RecordCodec.decode("y1|YQ==:YQ==,"));
  }

  @Test
  void balanceField() {
    Map<String, byte[]> rec = new HashMap<>();
    rec.put(ClosedEconomyWorkload.BALANCE_FIELD, ClosedEconomyWorkload.balanceBytes(1234));
    assertEquals(1234, ClosedEconomyWorkload.balanceOf(RecordCodec.decode(RecordCodec.encode(rec))));
  }
}
