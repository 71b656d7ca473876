package dev.snowline.ycsb;

import site.ycsb.Status;

/**
 * The one operation the closed-economy workload needs beyond YCSB's {@link site.ycsb.DB}: move money between
 * two accounts. An implementation says what isolation the transfer gets; {@link SnowlineClient} runs it as ONE
 * snowline interactive transaction when {@code snowline.transactional=true}, and as a read then a separate
 * write (not isolated) otherwise.
 */
public interface ClosedEconomyDB {
  /**
   * Moves {@code min(amount, balance of from)} from account {@code from} to account {@code to} (both keys of
   * {@code table}; the balance is the record field {@link ClosedEconomyWorkload#BALANCE_FIELD}).
   *
   * @return OK when the transfer took effect, NOT_FOUND when an account does not exist, or an error
   */
  Status transfer(String table, String from, String to, long amount);
}
