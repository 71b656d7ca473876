package dev.snowline.ycsb;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;

/**
 * How a YCSB record (field name to bytes) is stored as ONE snowline value (a proto {@code string}, so UTF-8).
 *
 * <p>A record is {@code y1|} followed by its fields in field-name order, separated by {@code ,}, each field
 * written as {@code base64(name):base64(value)} (standard Base64 alphabet with padding, of the UTF-8 name and
 * of the raw value bytes). The empty record is {@code y1|}. Base64 never contains {@code ,} or {@code :}, so
 * any field name and any bytes round-trip. Example: {@code {field0: "ab"}} is {@code y1|ZmllbGQw:YWI=}.
 *
 * <p>A deleted record is the tombstone {@code y1~}: snowline has no delete, so a YCSB delete writes this value
 * and a read of it answers NOT_FOUND, as for a key never written.
 */
public final class RecordCodec {
  /** The prefix of every encoded record. */
  public static final String RECORD_PREFIX = "y1|";
  /** The value a delete writes. */
  public static final String TOMBSTONE = "y1~";

  private static final Base64.Encoder ENC = Base64.getEncoder();
  private static final Base64.Decoder DEC = Base64.getDecoder();

  private RecordCodec() {}

  /** Encodes a record; the map's order does not matter (fields are written in name order). */
  public static String encode(Map<String, byte[]> fields) {
    TreeMap<String, byte[]> sorted = new TreeMap<>(fields);
    StringBuilder sb = new StringBuilder(RECORD_PREFIX.length() + 16 + fields.size() * 48);
    sb.append(RECORD_PREFIX);
    boolean first = true;
    for (Map.Entry<String, byte[]> e : sorted.entrySet()) {
      if (!first) {
        sb.append(',');
      }
      first = false;
      sb.append(ENC.encodeToString(e.getKey().getBytes(StandardCharsets.UTF_8)));
      sb.append(':');
      sb.append(ENC.encodeToString(e.getValue()));
    }
    return sb.toString();
  }

  /** True when the stored value is a delete's tombstone. */
  public static boolean isTombstone(String value) {
    return TOMBSTONE.equals(value);
  }

  /**
   * Decodes a stored value into field name to bytes (in name order).
   *
   * @return null for the tombstone
   * @throws IllegalArgumentException when the value is not a record this codec wrote
   */
  public static Map<String, byte[]> decode(String value) {
    if (isTombstone(value)) {
      return null;
    }
    if (value == null || !value.startsWith(RECORD_PREFIX)) {
      throw new IllegalArgumentException("not a YCSB record (no '" + RECORD_PREFIX + "' prefix): " + abbreviate(value));
    }
    TreeMap<String, byte[]> out = new TreeMap<>();
    int pos = RECORD_PREFIX.length();
    int len = value.length();
    while (pos < len) {
      int comma = value.indexOf(',', pos);
      int end = comma < 0 ? len : comma;
      int colon = value.indexOf(':', pos);
      if (colon < 0 || colon > end) {
        throw new IllegalArgumentException("malformed field at offset " + pos + ": " + abbreviate(value));
      }
      String name = new String(DEC.decode(value.substring(pos, colon)), StandardCharsets.UTF_8);
      byte[] bytes = DEC.decode(value.substring(colon + 1, end));
      out.put(name, bytes);
      pos = end + 1;
      if (comma >= 0 && pos == len) {
        throw new IllegalArgumentException("trailing ',': " + abbreviate(value));
      }
    }
    return out;
  }

  private static String abbreviate(String s) {
    if (s == null) {
      return "null";
    }
    return s.length() <= 60 ? s : s.substring(0, 60) + "...";
  }
}
