-- Table 2: Secondary indexing, update: Yes.
-- expect: users_email change_email yes secondary-index
-- expect: users_name_idx change_email yes secondary-index
-- expect-coordination: change_email none
CREATE TABLE users (id INT PRIMARY KEY, email INT, name INT);
CREATE INDEX users_name_idx ON users (name);
-- @index users_email: users.email
-- transaction: change_email
UPDATE users SET email = ?, name = ? WHERE id = ?;
