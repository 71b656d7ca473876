-- §5.2 text (Table 2 counter rows): `>` threshold with increments: Yes.
-- expect: positive deposit yes counter-lower-bound-increment
-- expect-coordination: deposit none
CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL, CONSTRAINT positive CHECK (balance > 0));
-- @counter account.balance
-- transaction: deposit
UPDATE account SET balance = balance + ? WHERE id = ?;
