-- Table 2: AUTO_INCREMENT, insert: No. Deferred to commit, one atomic increment at the owner (§6).
-- expect: orders.id place no auto-increment-insert
-- expect: orders_pk place no uniqueness-sequence
-- expect-coordination: place owner-increment
CREATE TABLE orders (id INT NOT NULL AUTO_INCREMENT, amount INT, CONSTRAINT orders_pk PRIMARY KEY (id));
-- transaction: place
INSERT INTO orders (amount) VALUES (?);
