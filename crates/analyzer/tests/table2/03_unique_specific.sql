-- Table 2: Uniqueness, choose specific value: No.
-- expect: users.id register no uniqueness-specific-value
-- expect-coordination: register serializable
CREATE TABLE users (id INT PRIMARY KEY, name INT);
-- transaction: register
INSERT INTO users (id, name) VALUES (?, ?);
