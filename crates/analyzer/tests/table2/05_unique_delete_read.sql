-- §5.1 text: uniqueness is I-confluent under deletion and selection (reading) by unique key.
-- expect: users.id remove yes uniqueness-delete-or-read
-- expect: users.id lookup yes untouched
-- expect: users.id rename yes uniqueness-delete-or-read
-- expect-coordination: remove none
CREATE TABLE users (id INT PRIMARY KEY, name INT);
-- transaction: remove
DELETE FROM users WHERE id = ?;
-- transaction: lookup
SELECT name FROM users WHERE id = ?;
-- transaction: rename
UPDATE users SET name = ? WHERE id = ?;
