-- Table 2: Foreign key, insert: Yes.
-- expect: emp_dept hire yes fk-insert
-- expect: emp_dept open_dept yes fk-unaffected
-- expect-coordination: hire none
CREATE TABLE dept (id INT PRIMARY KEY);
CREATE TABLE emp (id INT PRIMARY KEY, dept_id INT, CONSTRAINT emp_dept FOREIGN KEY (dept_id) REFERENCES dept (id));
-- @unique-any emp.id, dept.id
-- transaction: hire
INSERT INTO emp (id, dept_id) VALUES (?, ?);
-- transaction: open_dept
INSERT INTO dept (id) VALUES (?);
