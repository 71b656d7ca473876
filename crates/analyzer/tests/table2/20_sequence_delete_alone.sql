-- Deleting from a dense sequence with no concurrent insert: each branch keeps a range, and two ranges
-- intersect in a range (Yes).
-- expect: log.id trim yes auto-increment-delete-oldest
-- expect-coordination: trim none
CREATE TABLE log (id INT AUTO_INCREMENT, v INT);
-- transaction: trim
DELETE FROM log WHERE id = ?;
