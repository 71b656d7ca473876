-- Table 2: Foreign key, delete: No (a plain delete of a parent races an insert that references it).
-- expect: emp_dept close_dept no fk-delete
-- expect: emp_dept hire no fk-insert-racing-delete
-- expect-coordination: close_dept serializable
CREATE TABLE dept (id INT PRIMARY KEY);
CREATE TABLE emp (id INT PRIMARY KEY, dept_id INT, CONSTRAINT emp_dept FOREIGN KEY (dept_id) REFERENCES dept (id));
-- @unique-any emp.id
-- transaction: hire
INSERT INTO emp (id, dept_id) VALUES (?, ?);
-- transaction: close_dept
DELETE FROM dept WHERE id = ?;
