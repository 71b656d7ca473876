-- §5.2 text: `<` threshold with decrements: Yes.
-- expect: under_cap drop yes counter-upper-bound-decrement
-- expect-coordination: drop none
CREATE TABLE course (id INT PRIMARY KEY, enrolled INT NOT NULL, CONSTRAINT under_cap CHECK (enrolled < 2));
-- @counter course.enrolled
-- transaction: drop
UPDATE course SET enrolled = enrolled - 1 WHERE id = ?;
