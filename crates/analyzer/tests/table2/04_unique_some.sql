-- Table 2: Uniqueness, choose some value: Yes (each replica draws ids from its own namespace).
-- expect: users.id register yes uniqueness-some-value
-- expect-coordination: register none
CREATE TABLE users (id INT PRIMARY KEY, name INT);
-- @unique-any users.id
-- transaction: register
INSERT INTO users (id, name) VALUES (?, ?);
