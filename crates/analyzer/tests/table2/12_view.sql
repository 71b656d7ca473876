-- Table 2: Materialized views, update: Yes (kept with additive changes: the merge adds both sides).
-- expect: order_total place yes view-additive
-- expect: order_total grow yes view-additive
-- expect-coordination: place none
-- expect-coordination: grow none
CREATE TABLE orders (id INT PRIMARY KEY, amount INT NOT NULL);
CREATE TABLE totals (id INT PRIMARY KEY, total INT NOT NULL);
-- @unique-any orders.id
-- @counter totals.total, orders.amount
-- @view order_total: totals.total = SELECT SUM(amount) FROM orders
-- transaction: place
INSERT INTO orders (id, amount) VALUES (?, ?);
UPDATE totals SET total = total + ? WHERE id = ?;
-- transaction: grow
UPDATE orders SET amount = amount + ? WHERE id = ?;
UPDATE totals SET total = total + ? WHERE id = ?;
