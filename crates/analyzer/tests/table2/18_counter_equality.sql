-- §5.2 text: "we can similarly guarantee equality but not in-equality for counters": `=` Yes, `<>` No.
-- expect: exactly_one bump yes counter-equality
-- expect: not_two bump no counter-inequality
-- expect-coordination: bump serializable
CREATE TABLE meter (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL,
  CONSTRAINT exactly_one CHECK (a = 1), CONSTRAINT not_two CHECK (b <> 2));
-- @counter meter.a, meter.b
-- transaction: bump
UPDATE meter SET a = a + ?, b = b + 1 WHERE id = ?;
