-- Table 2: Equality, any operation: Yes (§5.1, per-record invariants; NOT NULL is one).
-- expect: item.status place yes per-record
-- expect: item.status relabel yes per-record
-- expect: status_is_one relabel yes per-record
-- expect-coordination: relabel none
CREATE TABLE item (id INT PRIMARY KEY, status INT NOT NULL, CONSTRAINT status_is_one CHECK (status = 1));
-- @unique-any item.id
-- transaction: place
INSERT INTO item (id, status) VALUES (?, ?);
-- transaction: relabel
UPDATE item SET status = ? WHERE id = ?;
