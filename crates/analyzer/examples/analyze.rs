//! `cargo run -p snowline-analyzer --example analyze -- SCHEMA.sql [TRANSACTIONS.sql] [--json]`: the
//! analyzer from the command line until the `snowline analyze` command is wired.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(schema) = files.first() else {
        eprintln!("usage: analyze SCHEMA.sql [TRANSACTIONS.sql] [--json]");
        std::process::exit(2);
    };
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f}: {e}"));
    let schema_sql = read(schema);
    let txns = files.get(1).map(|f| (read(f), f.to_string()));
    match snowline_analyzer::analyze(&schema_sql, schema, txns.as_ref().map(|(t, f)| (t.as_str(), f.as_str()))) {
        Ok(r) if json => println!("{}", r.to_json()),
        Ok(r) => print!("{r}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
