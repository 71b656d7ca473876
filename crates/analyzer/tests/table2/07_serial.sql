-- Table 2: AUTO_INCREMENT, insert: No (SERIAL spelling).
-- expect: tickets.id issue no auto-increment-insert
-- expect-coordination: issue owner-increment
CREATE TABLE tickets (id SERIAL, holder INT);
-- transaction: issue
INSERT INTO tickets (holder) VALUES (?);
