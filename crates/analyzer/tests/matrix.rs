//! A matrix of small schemas × small workloads (every transaction alone and every pair of them), each
//! pair's rule verdict cross-checked against the bounded checker.

use crate::common::defects;
use snowline_analyzer::bounded::Bound;

const SCHEMAS: &[(&str, &str)] = &[
    (
        "counter>=",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv CHECK (c >= 1));\n-- @counter t.c\n",
    ),
    (
        "counter<=",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv CHECK (c <= 1));\n-- @counter t.c\n",
    ),
    (
        "counter=",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv CHECK (c = 1));\n-- @counter t.c\n",
    ),
    (
        "counter<>",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv CHECK (c <> 1));\n-- @counter t.c\n",
    ),
    ("check>", "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv CHECK (c > 0));\n"),
    ("unique", "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL, CONSTRAINT inv UNIQUE (c));\n"),
    ("unique-any", "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL);\n-- @unique-any t.id\n"),
    (
        "fk",
        "CREATE TABLE p (id INT PRIMARY KEY);\nCREATE TABLE t (id INT PRIMARY KEY, c INT, CONSTRAINT inv FOREIGN KEY (c) REFERENCES p (id));\n",
    ),
    (
        "fk-cascade",
        "CREATE TABLE p (id INT PRIMARY KEY);\nCREATE TABLE t (id INT PRIMARY KEY, c INT, CONSTRAINT inv FOREIGN KEY (c) REFERENCES p (id) ON DELETE CASCADE);\n",
    ),
    ("auto-increment", "CREATE TABLE t (id INT AUTO_INCREMENT, c INT NOT NULL);\n"),
    (
        "view",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL);\nCREATE TABLE v (k INT PRIMARY KEY, total INT NOT NULL);\n-- @counter v.total\n-- @view inv: v.total = SELECT SUM(c) FROM t\n",
    ),
    (
        "view-count",
        "CREATE TABLE t (id INT PRIMARY KEY, c INT);\nCREATE TABLE v (k INT PRIMARY KEY, total INT NOT NULL);\n-- @counter v.total\n-- @view inv: v.total = SELECT COUNT(*) FROM t WHERE c IS NOT NULL\n",
    ),
    ("index", "CREATE TABLE t (id INT PRIMARY KEY, c INT);\nCREATE INDEX inv ON t (c);\n"),
    ("not-null", "CREATE TABLE t (id INT PRIMARY KEY, c INT CONSTRAINT inv NOT NULL);\n"),
    ("unique-pair", "CREATE TABLE t (id INT NOT NULL, c INT NOT NULL, CONSTRAINT inv UNIQUE (id, c));\n"),
    (
        "sequence",
        "CREATE TABLE g (id INT PRIMARY KEY, n INT NOT NULL);\nCREATE TABLE t (id INT, c INT);\n-- @counter g.n\n-- @sequence inv: t.id BY g.n\n",
    ),
];

const TXNS: &[(&str, &str)] = &[
    ("ins", "INSERT INTO t (id, c) VALUES (?, ?);"),
    ("ins_const", "INSERT INTO t (id, c) VALUES (?, 1);"),
    ("ins_noid", "INSERT INTO t (c) VALUES (?);"),
    ("inc", "UPDATE t SET c = c + 1 WHERE id = ?;"),
    ("incp", "UPDATE t SET c = c + ? WHERE id = ?;"),
    ("dec", "UPDATE t SET c = c - 1 WHERE id = ?;"),
    ("set", "UPDATE t SET c = ? WHERE id = ?;"),
    ("set_null", "UPDATE t SET c = NULL WHERE id = ?;"),
    ("set_id", "UPDATE t SET id = ? WHERE c = ?;"),
    ("del", "DELETE FROM t WHERE id = ?;"),
    ("del_c", "DELETE FROM t WHERE c = ?;"),
    ("sel", "SELECT c FROM t WHERE id = ?;"),
    ("p_ins", "INSERT INTO p (id) VALUES (?);"),
    ("p_del", "DELETE FROM p WHERE id = ?;"),
    ("p_set", "UPDATE p SET id = ? WHERE id = ?;"),
    ("v_ins", "INSERT INTO t (id, c) VALUES (?, ?);\nUPDATE v SET total = total + ? WHERE k = ?;"),
    ("v_del", "DELETE FROM t WHERE id = ?;\nUPDATE v SET total = total - ? WHERE k = ?;"),
    ("v_set", "UPDATE t SET c = ? WHERE id = ?;\nUPDATE v SET total = total + ? WHERE k = ?;"),
    ("v_inc", "UPDATE t SET c = c + ? WHERE id = ?;\nUPDATE v SET total = total + ? WHERE k = ?;"),
    ("v_null", "UPDATE t SET c = NULL WHERE id = ?;\nUPDATE v SET total = total - ? WHERE k = ?;"),
    ("v_only", "UPDATE v SET total = total + ? WHERE k = ?;"),
    ("del_all", "DELETE FROM t;"),
    ("inc_all", "UPDATE t SET c = c + 1;"),
    ("ins_null", "INSERT INTO t (id, c) VALUES (?, NULL);"),
    ("g_next", "UPDATE g SET n = n + 1 WHERE id = ?;\nINSERT INTO t (id, c) VALUES (?, ?);"),
    ("g_bump", "UPDATE g SET n = n + 1 WHERE id = ?;"),
];

#[test]
fn rules_agree_with_the_checker_on_every_small_workload() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (sname, schema) in SCHEMAS {
        let mut ok_txns = Vec::new();
        for (tname, body) in TXNS {
            let text = format!("{schema}-- transaction: {tname}\n{body}\n");
            if snowline_analyzer::parse(&text, "m.sql", None).is_ok() {
                ok_txns.push((tname, body));
            }
        }
        for i in 0..ok_txns.len() {
            for j in i..ok_txns.len() {
                let mut text = schema.to_string();
                text += &format!("-- transaction: {}\n{}\n", ok_txns[i].0, ok_txns[i].1);
                if j != i {
                    text += &format!("-- transaction: {}\n{}\n", ok_txns[j].0, ok_txns[j].1);
                }
                let w = snowline_analyzer::parse(&text, "m.sql", None).unwrap();
                checked += 1;
                for d in defects(&w, &Bound::default(), None) {
                    failures.push(format!("[{sname}: {} + {}] {d}", ok_txns[i].0, ok_txns[j].0));
                }
            }
        }
    }
    assert!(checked > 1000, "{checked} workloads");
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}
