-- Table 2: Inequality, any operation: Yes (a per-record CHECK on an ordinary column: the merge only holds
-- rows, and values, of the branches).
-- expect: qty_nonzero restock yes per-record
-- expect: qty_small restock yes per-record
-- expect: qty_small take yes per-record
-- expect-coordination: take none
CREATE TABLE stock (id INT PRIMARY KEY, qty INT, CONSTRAINT qty_nonzero CHECK (qty <> 0), CONSTRAINT qty_small CHECK (qty < 2));
-- transaction: restock
UPDATE stock SET qty = ? WHERE id = ?;
-- transaction: take
UPDATE stock SET qty = qty - 1 WHERE id = ?;
