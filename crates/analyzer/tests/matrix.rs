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

/// Transactions of two statements (every ordered pair of shapes, or every `step`-th), each alone in its
/// workload. Returns (workloads, unsound verdicts, verdicts the checker could not witness or finish).
fn two_statement_workloads(step: usize) -> (usize, Vec<String>, Vec<String>) {
    let (mut checked, mut unsound, mut conservative) = (0, Vec::new(), Vec::new());
    let mut n = 0;
    for (sname, schema) in SCHEMAS {
        for (a, ab) in TXNS {
            for (b, bb) in TXNS {
                n += 1;
                if n % step != 0 {
                    continue;
                }
                let text = format!("{schema}-- transaction: {a}_{b}\n{ab}\n{bb}\n");
                let Ok(w) = snowline_analyzer::parse(&text, "m.sql", None) else { continue };
                checked += 1;
                for d in defects(&w, &Bound::default(), None) {
                    let line = format!("[{sname}: {a}; {b}] {d}");
                    if d.contains("says safe") { unsound.push(line) } else { conservative.push(line) }
                }
            }
        }
    }
    (checked, unsound, conservative)
}

/// Soundness on two-statement transactions: no rule calls a pair safe where the checker finds a violating
/// merge. (The rules are conservative there: a transaction whose second statement undoes its first, or
/// that can never keep the invariant, is still judged by its statements; `docs/ANALYZER.md` gives the count.)
#[test]
fn two_statement_transactions_are_judged_soundly() {
    let (checked, unsound, conservative) = two_statement_workloads(3);
    assert!(checked > 1000, "{checked} workloads");
    assert!(unsound.is_empty(), "{} unsound verdicts:\n{}", unsound.len(), unsound.join("\n"));
    println!("{checked} workloads, {} conservative verdicts", conservative.len());
}

/// All of them (about 4,000 workloads, a minute): `cargo test -p snowline-analyzer -- --ignored`.
#[test]
#[ignore]
fn every_two_statement_transaction_is_judged_soundly() {
    let (checked, unsound, conservative) = two_statement_workloads(1);
    println!("{checked} workloads, {} conservative verdicts", conservative.len());
    assert!(unsound.is_empty(), "{} unsound verdicts:\n{}", unsound.len(), unsound.join("\n"));
}
