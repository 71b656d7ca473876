//! `cargo run -p snowline-analyzer --example analyze -- SCHEMA.sql [TRANSACTIONS.sql] [--json]`: the
//! analyzer from the command line until the `snowline analyze` command is wired.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(schema) = files.first() else {
        eprintln!("usage: analyze SCHEMA.sql [TRANSACTIONS.sql] [--json]");
        std::process::exit(2);
    };
    let txns = files.get(1).map(std::path::Path::new);
    match snowline_analyzer::analyze_files(std::path::Path::new(schema), txns) {
        // A closed pipe (`| head`) ends the output quietly.
        Ok(r) if json => drop(writeln!(std::io::stdout(), "{}", r.to_json())),
        Ok(r) => drop(write!(std::io::stdout(), "{r}")),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
