-- The same bank with a different invariant: a cap on deposits (think of a regulated prepaid card).
-- Now the verdicts swap: deposit needs coordination, withdraw does not.
CREATE TABLE account (
  id      INT PRIMARY KEY,
  owner   INT NOT NULL,
  balance INT NOT NULL,
  CONSTRAINT under_cap CHECK (balance <= 2)
);
-- @counter account.balance
-- @unique-any account.id
