-- §5.2 text: `>` threshold with decrements: No.
-- expect: positive withdraw no counter-lower-bound-decrement
-- expect-coordination: withdraw serializable
CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL, CONSTRAINT positive CHECK (balance > 0));
-- @counter account.balance
-- transaction: withdraw
UPDATE account SET balance = balance - ? WHERE id = ?;
