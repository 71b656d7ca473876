-- The same bank with no balance invariant at all: nothing needs coordination.
CREATE TABLE account (
  id      INT PRIMARY KEY,
  owner   INT NOT NULL,
  balance INT NOT NULL
);
-- @counter account.balance
-- @unique-any account.id
