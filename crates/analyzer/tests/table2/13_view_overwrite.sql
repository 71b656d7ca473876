-- §5.2 text: last-writer-wins loses updates; a view kept by increments over an overwritten column does not merge.
-- expect: order_total reprice no view-non-additive
-- expect-coordination: reprice serializable
CREATE TABLE orders (id INT PRIMARY KEY, amount INT NOT NULL);
CREATE TABLE totals (id INT PRIMARY KEY, total INT NOT NULL);
-- @counter totals.total
-- @view order_total: totals.total = SELECT SUM(amount) FROM orders
-- transaction: reprice
UPDATE orders SET amount = ? WHERE id = ?;
UPDATE totals SET total = total + ? WHERE id = ?;
