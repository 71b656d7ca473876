-- §5.1/§6: ids from a sequence. Inserting takes the next id (No; owner-increment), and deleting ids while
-- another branch inserts leaves a gap or a maximum the generator disagrees with (No; the paper: "a similar
-- process can be performed for deletion during order delivery"). Deleting alone keeps a range (Yes).
-- expect: queue_ids enqueue no auto-increment-insert
-- expect: queue_ids dequeue no auto-increment-delete
-- expect-coordination: enqueue owner-increment
-- expect-coordination: dequeue owner-increment
CREATE TABLE gen (id INT PRIMARY KEY, next_id INT NOT NULL);
CREATE TABLE queue (id INT NOT NULL);
-- @counter gen.next_id
-- @sequence queue_ids: queue.id BY gen.next_id
-- transaction: enqueue
UPDATE gen SET next_id = next_id + 1 WHERE id = ?;
INSERT INTO queue (id) VALUES (?);
-- transaction: dequeue
DELETE FROM queue WHERE id = ?;
