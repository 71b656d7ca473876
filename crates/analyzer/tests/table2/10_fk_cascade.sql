-- Table 2: Foreign key, cascading delete: Yes (the merge deletes the dangling references too).
-- expect: emp_dept close_dept yes fk-cascading-delete
-- expect: emp_dept hire yes fk-insert
-- expect-coordination: close_dept none
-- expect-coordination: hire none
CREATE TABLE dept (id INT PRIMARY KEY);
CREATE TABLE emp (id INT PRIMARY KEY, dept_id INT,
  CONSTRAINT emp_dept FOREIGN KEY (dept_id) REFERENCES dept (id) ON DELETE CASCADE);
-- @unique-any emp.id
-- transaction: hire
INSERT INTO emp (id, dept_id) VALUES (?, ?);
-- transaction: close_dept
DELETE FROM dept WHERE id = ?;
