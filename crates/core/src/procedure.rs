//! Stored procedures: transaction templates every node knows, made of pure pieces with declared keys.
//!
//! A client runs one with `Request::Call { procedure, args }`. The template turns its arguments into
//! *pieces* ([`Procedure::plan`]), each declaring the keys it reads and writes before anything runs; a piece's
//! code ([`Procedure::run`]) is a pure function of the arguments, the values its reads returned and what
//! earlier pieces carried forward. Purity is what lets a protocol run a piece wherever its keys live (Rococo
//! runs pieces at the servers; 2PL runs them at the coordinator once it holds the locks), rerun it when a
//! durable server replays its log, and lets the simulator stay deterministic.
//!
//! The registry is the static list [`PROCEDURES`]: every client and server binary of a build has the same
//! templates, so registering one is one entry here (TPC-C's five transactions join it with the TPC-C issue).
//! A name the registry does not hold is refused as bad input (`OpError::Rejected`).
//!
//! History: a call is recorded as one transaction of its reads, then its writes, with the values it read and
//! wrote (`Reply::reads`, `Reply::writes`).

use crate::request::{Key, Value};

/// One piece of a procedure: the keys it reads and writes, declared before it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    pub reads: Vec<Key>,
    pub writes: Vec<Key>,
}

/// A transaction template. Implementations are stateless and pure.
pub trait Procedure: Sync {
    /// The name clients call it by.
    fn name(&self) -> &'static str;
    /// One line for `--help` and error messages: what the arguments are.
    fn usage(&self) -> &'static str;
    /// The pieces, with their declared keys, from the arguments alone; `Err` names what is wrong with them.
    fn plan(&self, args: &[Value]) -> Result<Vec<Piece>, String>;
    /// Run piece `piece` of the plan: `reads` holds the values its declared reads returned, in order (`None`:
    /// never written); `carried` is what earlier pieces pushed. Returns the values of its declared writes, in
    /// order. `Err` aborts the transaction at the procedure's own request (`AbortCause::User`).
    fn run(
        &self,
        piece: usize,
        args: &[Value],
        reads: &[Option<Value>],
        carried: &mut Vec<Value>,
    ) -> Result<Vec<Value>, String>;
}

impl std::fmt::Debug for dyn Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "procedure {}", self.name())
    }
}

/// Every registered stored procedure.
pub static PROCEDURES: &[&dyn Procedure] = &[&ReadWrite];

/// The registered procedure called `name`.
pub fn lookup(name: &str) -> Result<&'static dyn Procedure, String> {
    PROCEDURES.iter().copied().find(|p| p.name() == name).ok_or_else(|| {
        let names: Vec<&str> = PROCEDURES.iter().map(|p| p.name()).collect();
        format!("no stored procedure named {name:?}; registered: {}", names.join(", "))
    })
}

/// Plan a call and check that its declared keys are sane; the error is the message the client sees.
pub fn plan_call(name: &str, args: &[Value]) -> Result<(&'static dyn Procedure, Vec<Piece>), String> {
    let procedure = lookup(name)?;
    let pieces = procedure.plan(args).map_err(|e| format!("{name}: {e} (usage: {})", procedure.usage()))?;
    if pieces.iter().all(|p| p.reads.is_empty() && p.writes.is_empty()) {
        return Err(format!("{name}: the call names no key (usage: {})", procedure.usage()));
    }
    Ok((procedure, pieces))
}

/// `rw R k1 … kR k1' v1' …`: the YCSB-style transaction of the NMSI paper's workloads (§V) as a template:
/// read `R` keys, then write the given values (one piece per key, reads first). The written values come from
/// the arguments, so a client knows them when it invokes the call.
pub struct ReadWrite;

impl Procedure for ReadWrite {
    fn name(&self) -> &'static str {
        "rw"
    }

    fn usage(&self) -> &'static str {
        "rw R KEY×R [KEY VALUE]… (read R keys, then write each KEY=VALUE)"
    }

    fn plan(&self, args: &[Value]) -> Result<Vec<Piece>, String> {
        let (count, rest) = args.split_first().ok_or("missing the read count R")?;
        let reads: usize = count.parse().map_err(|_| format!("read count {count:?} is not a number"))?;
        if reads > rest.len() {
            return Err(format!("{reads} reads but only {} more arguments", rest.len()));
        }
        let (read_keys, writes) = rest.split_at(reads);
        if writes.len() % 2 != 0 {
            return Err("writes come in KEY VALUE pairs; the last key has no value".into());
        }
        let mut pieces: Vec<Piece> =
            read_keys.iter().map(|k| Piece { reads: vec![k.clone()], writes: vec![] }).collect();
        pieces.extend(writes.chunks(2).map(|kv| Piece { reads: vec![], writes: vec![kv[0].clone()] }));
        Ok(pieces)
    }

    fn run(
        &self,
        piece: usize,
        args: &[Value],
        _reads: &[Option<Value>],
        _carried: &mut Vec<Value>,
    ) -> Result<Vec<Value>, String> {
        let reads: usize = args[0].parse().map_err(|_| "bad read count".to_string())?;
        if piece < reads {
            return Ok(Vec::new());
        }
        let at = 1 + reads + 2 * (piece - reads) + 1;
        args.get(at).map(|v| vec![v.clone()]).ok_or_else(|| format!("piece {piece} has no value"))
    }
}

/// Run a whole plan at one place, given a way to read a key: what a coordinator that already holds every
/// declared key does (2PL). Returns the reads (key, value) and the writes (key, value) in program order.
#[allow(clippy::type_complexity)]
pub fn run_all(
    procedure: &dyn Procedure,
    args: &[Value],
    pieces: &[Piece],
    mut read: impl FnMut(&Key) -> Option<Value>,
) -> Result<(Vec<(Key, Option<Value>)>, Vec<(Key, Value)>), String> {
    let mut carried = Vec::new();
    let (mut reads, mut writes) = (Vec::new(), Vec::<(Key, Value)>::new());
    for (i, piece) in pieces.iter().enumerate() {
        // A piece sees the procedure's own earlier writes.
        let values: Vec<Option<Value>> = piece
            .reads
            .iter()
            .map(|k| writes.iter().rev().find(|(wk, _)| wk == k).map(|(_, v)| v.clone()).or_else(|| read(k)))
            .collect();
        reads.extend(piece.reads.iter().cloned().zip(values.iter().cloned()));
        let out = procedure.run(i, args, &values, &mut carried)?;
        if out.len() != piece.writes.len() {
            return Err(format!(
                "{} piece {i} produced {} values for {} declared writes",
                procedure.name(),
                out.len(),
                piece.writes.len()
            ));
        }
        writes.extend(piece.writes.iter().cloned().zip(out));
    }
    Ok((reads, writes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<Value> {
        s.iter().map(|a| Value::from(*a)).collect()
    }

    #[test]
    fn rw_plans_reads_then_writes_and_runs_purely() {
        let a = args(&["2", "x", "y", "y", "v1", "z", "v2"]);
        let (p, pieces) = plan_call("rw", &a).unwrap();
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[0].reads, vec![Key::from("x")]);
        assert_eq!(pieces[3].writes, vec![Key::from("z")]);
        let (reads, writes) = run_all(p, &a, &pieces, |k| (&**k == "x").then(|| Value::from("old"))).unwrap();
        assert_eq!(reads, vec![("x".into(), Some("old".into())), ("y".into(), None)]);
        assert_eq!(writes, vec![("y".into(), "v1".into()), ("z".into(), "v2".into())]);
    }

    #[test]
    fn bad_calls_are_refused_with_the_usage() {
        assert!(plan_call("nope", &[]).unwrap_err().contains("registered: rw"));
        assert!(plan_call("rw", &args(&["3", "x"])).unwrap_err().contains("usage"));
        assert!(plan_call("rw", &args(&["0", "x"])).unwrap_err().contains("pairs"));
        assert!(plan_call("rw", &args(&["0"])).unwrap_err().contains("no key"));
    }
}
