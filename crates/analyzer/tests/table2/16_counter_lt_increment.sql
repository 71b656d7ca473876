-- §5.2 text: `<` threshold with increments: No.
-- expect: under_cap enroll no counter-upper-bound-increment
-- expect-coordination: enroll serializable
CREATE TABLE course (id INT PRIMARY KEY, enrolled INT NOT NULL, CONSTRAINT under_cap CHECK (enrolled < 2));
-- @counter course.enrolled
-- transaction: enroll
UPDATE course SET enrolled = enrolled + 1 WHERE id = ?;
