//! Bad input: each gets an error naming file, line and column, and no verdict.

/// (schema, transactions file or "", expected error).
const CASES: &[(&str, &str, &str)] = &[
    (
        "CREATE TABLE t (id INT PRIMARY KEY,\n  x INT NOT NUL);\n",
        "",
        "schema.sql:2:9: syntax error: Expected: ',' or ')' after column definition, found: NOT",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY);\n-- transaction: a\nINSERT INTO u (id) VALUES (?);\n",
        "",
        "schema.sql:3:13: unknown table `u`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY);\n-- transaction: a\nUPDATE t SET y = 1 WHERE id = ?;\n",
        "",
        "schema.sql:3:14: unknown column `y` in table `t`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY);\n-- @frobnicate t.id\n",
        "",
        "schema.sql:2:4: unknown annotation `@frobnicate` (known: @counter, @unique-any, @sequence, @index, @view)",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY);\n-- @counter t.nope\n",
        "",
        "schema.sql:2:15: unknown column `nope` in table `t`",
    ),
    ("CREATE TABLE t (id INT PRIMARY KEY);\n-- @counter u.id\n", "", "schema.sql:2:13: unknown table `u`"),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT, CHECK (x * 2 > 1));\n",
        "",
        "schema.sql:1:51: unsupported CHECK `x * 2 > 1`: only `column op constant` with op one of = <> < <= > >=, or `column IS NOT NULL`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT, CONSTRAINT f FOREIGN KEY (x) REFERENCES nowhere (id));\n",
        "",
        "schema.sql:1:84: unknown table `nowhere`",
    ),
    (
        "CREATE TABLE p (id INT PRIMARY KEY);\nCREATE TABLE t (id INT PRIMARY KEY, x INT, FOREIGN KEY (x) REFERENCES p (nope));\n",
        "",
        "schema.sql:2:74: unknown column `nope` in table `p`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nUPDATE t SET x = x * 2 WHERE id = ?;\n",
        "",
        "schema.sql:3:18: unsupported SET `x = x * 2`: only `x = ?|constant` or `x = x + k` / `x - k`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nDELETE FROM t WHERE id = ? OR x = 1;\n",
        "",
        "schema.sql:3:21: unsupported WHERE `id = ? OR x = 1`: only AND of `column op ?|constant` and `column IS [NOT] NULL`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- @counter t.x\n-- transaction: a\nUPDATE t SET x = ? WHERE id = ?;\n",
        "",
        "schema.sql:4:14: `t.x` is a @counter: change it with `x = x + k` or `x - k`, not an assignment",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nINSERT INTO t (id, x) SELECT id, x FROM t;\n",
        "",
        "schema.sql:3:23: unsupported: INSERT ... SELECT (use VALUES)",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nINSERT INTO t (id, x) VALUES (?);\n",
        "",
        "schema.sql:3:31: INSERT into `t`: 1 values for 2 columns",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nDROP TABLE t;\n",
        "",
        "schema.sql:3:1: unsupported statement in a transaction: only INSERT, UPDATE, DELETE, SELECT, BEGIN, COMMIT",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\nDROP TABLE t;\n",
        "",
        "schema.sql:2:1: unsupported statement in the schema: only CREATE TABLE and CREATE INDEX (put transactions after a `-- transaction: NAME` line)",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nSELECT nope FROM t WHERE id = ?;\n",
        "",
        "schema.sql:3:8: unknown column `nope` in `t`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nSELECT x FROM nowhere;\n",
        "",
        "schema.sql:3:15: unknown table `nowhere`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\n-- transaction: a\nSELECT x FROM t;\n",
        "",
        "schema.sql:3:4: transaction \"a\" is declared twice",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\n-- nothing here\n",
        "",
        "schema.sql:2:4: transaction `a` has no statements",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n",
        "SELECT x FROM t;\n-- transaction: a\nSELECT x FROM t;\n",
        "txns.sql:1:1: statement outside a transaction: start one with `-- transaction: NAME`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n",
        "-- transaction: a\nUPDATE t SET x = 1 WHERE\n",
        "txns.sql:2:25: syntax error: Expected: an expression, found: EOF",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- @counter t.x\n-- @sequence t.id BY t.nope\n",
        "",
        "schema.sql:3:24: unknown column `nope` in table `t`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- @sequence t.id BY t.x\n",
        "",
        "schema.sql:2:22: @sequence: `t.x` must be declared a @counter",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- @counter t.x\n-- @view t.x = SELECT MAX(id) FROM t\n",
        "",
        "schema.sql:3:16: @view: expected `SELECT SUM(column) | COUNT(*) FROM table [WHERE column IS [NOT] NULL]`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- @view t.x = SELECT SUM(id) FROM t\n",
        "",
        "schema.sql:2:10: @view: `t.x` must be declared a @counter",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\nCREATE TABLE t (id INT);\n",
        "",
        "schema.sql:2:14: table `t` is declared twice",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT GENERATED ALWAYS AS (id + 1));\n",
        "",
        "schema.sql:1:37: unsupported column option `GENERATED ALWAYS AS (id + 1)` on `t.x`",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: bad name!\nSELECT x FROM t;\n",
        "",
        "schema.sql:2:4: bad transaction name \"bad name!\": use letters, digits, '_' or '-'",
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, x INT);\n-- transaction: a\nUPDATE t SET x = 1 WHERE x = 'a';\n",
        "",
        "schema.sql:3:26: unsupported WHERE `x = 'a'`: only AND of `column op ?|constant` and `column IS [NOT] NULL`",
    ),
];

fn run(schema: &str, txns: &str) -> String {
    let t = if txns.is_empty() { None } else { Some((txns, "txns.sql")) };
    match snowline_analyzer::analyze(schema, "schema.sql", t) {
        Ok(r) => panic!("expected an error, got a report:\n{r}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_bad_input_gets_a_located_error() {
    assert!(CASES.len() >= 20);
    for (i, (schema, txns, want)) in CASES.iter().enumerate() {
        let got = run(schema, txns);
        assert_eq!(&got, want, "case {}", i + 1);
    }
}

/// Cutting the TPC-C example anywhere (or dropping any one line) gives a report or a located error, never a
/// panic, and an error always points inside the file.
#[test]
fn damaged_input_never_panics() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tpcc");
    let schema = std::fs::read_to_string(root.join("schema.sql")).unwrap();
    let txns = std::fs::read_to_string(root.join("transactions.sql")).unwrap();
    let check = |s: &str, t: &str| {
        if let Err(e) = snowline_analyzer::parse(s, "schema.sql", Some((t, "txns.sql"))) {
            let text = if e.loc.file == "schema.sql" { s } else { t };
            assert!(e.loc.line as usize <= text.lines().count().max(1), "{e}");
        }
    };
    for cut in (0..schema.len()).step_by(5).filter(|&i| schema.is_char_boundary(i)) {
        check(&schema[..cut], &txns);
    }
    for cut in (0..txns.len()).step_by(3).filter(|&i| txns.is_char_boundary(i)) {
        check(&schema, &txns[..cut]);
    }
    for skip in 0..schema.lines().count() {
        let s: Vec<&str> = schema.lines().enumerate().filter(|(i, _)| *i != skip).map(|(_, l)| l).collect();
        check(&s.join("\n"), &txns);
    }
}
