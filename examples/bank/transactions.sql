-- transaction: open
INSERT INTO account (id, owner, balance) VALUES (?, ?, 0);
-- transaction: deposit
UPDATE account SET balance = balance + ? WHERE id = ?;
-- transaction: withdraw
UPDATE account SET balance = balance - ? WHERE id = ?;
-- transaction: balance
SELECT balance FROM account WHERE id = ?;
