-- A bank whose invariant is a non-negative balance. With examples/bank/transactions.sql:
--   deposit  -> none          (a lower bound survives concurrent increments)
--   withdraw -> serializable  (two withdrawals, each fine alone, can overdraw together)
--   open     -> none          (account ids are "some unique value")
CREATE TABLE account (
  id      INT PRIMARY KEY,
  owner   INT NOT NULL,
  balance INT NOT NULL,
  CONSTRAINT non_negative CHECK (balance >= 0)
);
-- @counter account.balance
-- @unique-any account.id
