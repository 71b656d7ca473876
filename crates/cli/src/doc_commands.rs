//! Every command the README and docs show runs against the CLI as it is: each `snowline ...` line of their
//! `sh` code blocks (and the README's `cargo run ... -- ARGS`) is parsed by the real argument parser, so a
//! renamed command or flag fails this test instead of a reader.

use super::{Cli, refuse_client_flags};
use clap::{CommandFactory, FromArgMatches};
use std::path::{Path, PathBuf};

/// The Markdown files whose commands are checked: the README and everything in docs/.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The command lines of shell code blocks, continuation lines joined: `(line number, text)`. In `sh`, `bash`
/// and `shell` blocks every line is a command; in `console` blocks only the lines after a `$ ` prompt are
/// (the rest is what they printed).
fn shell_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut block: Option<bool> = None; // Some(console?) inside a shell block
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            block = match (block, info.trim()) {
                (None, "sh" | "bash" | "shell") => Some(false),
                (None, "console") => Some(true),
                _ => None,
            };
            pending = None;
            continue;
        }
        let Some(console) = block else { continue };
        let text = match (&pending, console) {
            (Some(_), _) | (None, false) => trimmed,
            (None, true) => match trimmed.strip_prefix("$ ") {
                Some(command) => command,
                None => continue,
            },
        };
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match text.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(text);
                out.push((start, joined));
            }
        }
    }
    out
}

/// Split a shell line into words (quotes respected), stopping at a comment, a pipe, a redirection or a
/// command separator.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => out.extend(word.take()),
            (None, '#' | '|' | ';' | '>' | '&') if word.is_none() => break,
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    out.extend(word);
    out
}

/// The arguments a documented line passes to `snowline`, if it runs it.
fn snowline_args(line: &str) -> Option<Vec<String>> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let w = words(line);
    match w.first().map(String::as_str) {
        Some("snowline") => Some(w[1..].to_vec()),
        Some("cargo") if w.get(1).is_some_and(|c| c == "run") => {
            w.iter().position(|a| a == "--").map(|dash| w[dash + 1..].to_vec())
        }
        _ => None,
    }
}

#[test]
fn the_shell_splitter_stops_at_comments_and_pipes_and_keeps_quotes() {
    assert_eq!(words("snowline get 'a b' # c"), ["snowline", "get", "a b"]);
    assert_eq!(words("snowline check h.jsonl --all | head"), ["snowline", "check", "h.jsonl", "--all"]);
    assert_eq!(words(r#"snowline put k "" "#), ["snowline", "put", "k", ""]);
    let block = "```sh\nsnowline sim --protocol av \\\n  --seed 7\n```\n```text\nsnowline get (output)\n```\n";
    assert_eq!(shell_lines(block), [(2, "snowline sim --protocol av  --seed 7".to_string())]);
    let console = "```console\n$ snowline get k\nsnowline --cluster d put k v  write one key\n```\n";
    assert_eq!(shell_lines(console), [(2, "snowline get k".to_string())]);
    assert_eq!(
        snowline_args("cargo run --release -- demo --seconds 1"),
        Some(vec!["demo".into(), "--seconds".into(), "1".into()])
    );
}

#[test]
fn every_documented_command_parses() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in documents() {
        let text = std::fs::read_to_string(&path).expect("a readable document");
        for (line, command) in shell_lines(&text) {
            let Some(args) = snowline_args(&command) else { continue };
            checked += 1;
            let parsed = match Cli::command().try_get_matches_from(std::iter::once("snowline".to_string()).chain(args))
            {
                // `--help` and `--version` lines are documented commands too.
                Err(e)
                    if matches!(
                        e.kind(),
                        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                    ) =>
                {
                    Ok(())
                }
                other => other.map_err(|e| e.to_string()).and_then(|m| {
                    Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
                    refuse_client_flags(&m).map_err(|e| e.to_string())
                }),
            };
            if let Err(e) = parsed {
                let e = e.lines().next().unwrap_or_default().to_string();
                failures.push(format!("{}:{line}: {command}\n    {e}", path.display()));
            }
        }
    }
    assert!(checked >= 50, "only {checked} documented commands found: is the scan broken?");
    assert!(failures.is_empty(), "documented commands the CLI refuses:\n{}", failures.join("\n"));
}
