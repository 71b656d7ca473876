//! Stored procedures: transaction templates every node knows, made of pure pieces with declared keys.
//!
//! A client runs one with `Request::Call { procedure, args }`. The template turns its arguments into
//! *pieces* ([`Procedure::plan`], in waves: a piece's keys may depend on the outputs of earlier immediate
//! pieces), each declaring the keys it reads and writes before it runs; a piece's
//! code ([`Procedure::run`]) is a pure function of the arguments, the values its reads returned and what
//! earlier pieces carried forward. Purity is what lets a protocol run a piece wherever its keys live (Rococo
//! runs pieces at the servers; 2PL runs them at the coordinator once it holds the locks), rerun it when a
//! durable server replays its log, and lets the simulator stay deterministic.
//!
//! The registry is the static list [`PROCEDURES`]: every client and server binary of a build has the same
//! templates, so registering one is one entry here (TPC-C's five transactions: [`crate::tpcc`]).
//! A name the registry does not hold is refused as bad input (`OpError::Rejected`).
//!
//! History: a call is recorded as one transaction of its reads, then its writes, with the values it read and
//! wrote (`Reply::reads`, `Reply::writes`).

use crate::request::{Key, Value};
use serde::{Deserialize, Serialize};

/// One piece of a procedure: the keys it reads and writes, declared before it runs, and whether it is
/// *immediate*.
///
/// Rococo's classification (Mu et al., OSDI 2014, §3): an immediate piece's output is needed before the
/// transaction can go on (a later piece's keys depend on it, as New-Order's order id decides which order rows
/// it inserts), so it runs when it is dispatched; a *deferrable* piece only produces writes and values for the
/// client, so it may wait until the transaction's order among its conflicting transactions is decided.
/// Protocols that run a whole transaction at one place (2PL, OCC) ignore the flag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    pub reads: Vec<Key>,
    pub writes: Vec<Key>,
    pub immediate: bool,
}

/// What a piece produced: the values of its declared writes, in order, and its output (for later pieces'
/// keys and values, and for the client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    pub writes: Vec<Value>,
    pub output: Vec<Value>,
}

/// What is known of the pieces planned so far: `known[i]` is piece `i`'s output once it has run where the
/// caller can see it (`None`: not run yet, or a deferrable piece whose output comes only at commit).
pub type Known = [Option<Vec<Value>>];

/// A transaction template. Implementations are stateless and pure.
///
/// **Plans grow in waves.** [`Procedure::plan`] returns every piece that can be declared from the arguments
/// and what is known; a caller runs (or dispatches) the new pieces, records their outputs, and plans again
/// with them; the plan is complete when planning adds nothing. Each plan extends the previous one (same
/// pieces, same order, more at the end). A piece's keys may depend only on the outputs of immediate pieces,
/// since a deferrable piece's output is not known before commit; a deferrable piece's values may depend on
/// the outputs of immediate pieces planned before it.
pub trait Procedure: Sync {
    /// The name clients call it by.
    fn name(&self) -> &'static str;
    /// One line for `--help` and error messages: what the arguments are.
    fn usage(&self) -> &'static str;
    /// Whether it never writes (a read-only transaction: a protocol may run it by its ROT algorithm).
    fn read_only(&self) -> bool {
        false
    }
    /// The pieces declarable from `args` and `known` (see the trait's doc); `Err` names what is wrong.
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String>;
    /// Run piece `piece`: `reads` holds the values its declared reads returned, in order (`None`: never
    /// written); `known` the outputs of earlier pieces, as for [`Procedure::plan`]. `Err` aborts the
    /// transaction: at the procedure's own request, or because what it read moved under it ([`PieceError`]).
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError>;
    /// A sequential id the call takes after the fact, at commit (the coordination-avoidance paper's §6:
    /// New-Order's `D_NEXT_O_ID`), once its plan is complete; `None` (the default): none. Protocols that run
    /// the call serializably ignore it (the procedure then reads and writes the counter itself, or not at all).
    fn deferred_id(&self, _args: &[Value], _known: &Known) -> Result<Option<DeferredId>, String> {
        Ok(None)
    }
    /// The key every key of the call lives with, if the call is single-partition by construction (TPC-C's
    /// Delivery of one district): a protocol may run the whole call at that key's partition in one step.
    fn home(&self, _args: &[Value]) -> Option<Key> {
        None
    }
}

/// A sequential id assigned at commit by one atomic increment at the counter's owner: the owner reads field
/// `field` of `counter` (materialized) as the id `n`, writes the merge `counter_value` to `counter` (which
/// adds 1 to that field) and `map_value` to the key `map_prefix` + `n` (the mapping from the call's
/// temporary id to `n`). Both keys live on one partition. The only coordination the call needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredId {
    pub counter: Key,
    pub field: usize,
    pub counter_value: Value,
    pub map_prefix: String,
    pub map_value: Value,
}

impl DeferredId {
    /// The mapping key of id `n`.
    pub fn map_key(&self, n: u64) -> Key {
        format!("{}{n}", self.map_prefix).into()
    }
}

/// Why a piece did not run; the transaction aborts with [`PieceError::cause`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PieceError {
    /// The procedure aborts at its own request (TPC-C's rollback) or cannot use what it read: cause `user`,
    /// and the same call fails the same way if retried.
    User(String),
    /// What the piece read changed since an earlier wave of the same call (another transaction got
    /// between them): cause `conflict`; the call had no effect and may commit if retried.
    Conflict(String),
}

impl PieceError {
    pub fn cause(&self) -> crate::AbortCause {
        match self {
            PieceError::User(_) => crate::AbortCause::User,
            PieceError::Conflict(_) => crate::AbortCause::Conflict,
        }
    }
}

impl std::fmt::Display for PieceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PieceError::User(e) | PieceError::Conflict(e) => f.write_str(e),
        }
    }
}

impl From<String> for PieceError {
    fn from(e: String) -> Self {
        PieceError::User(e)
    }
}

impl From<&str> for PieceError {
    fn from(e: &str) -> Self {
        PieceError::User(e.to_owned())
    }
}

impl std::fmt::Debug for dyn Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "procedure {}", self.name())
    }
}

/// Every registered stored procedure.
pub static PROCEDURES: &[&dyn Procedure] = &[
    &ReadWrite,
    &crate::tpcc::NewOrder,
    &crate::tpcc::Payment,
    &crate::tpcc::OrderStatus,
    &crate::tpcc::Delivery,
    &crate::tpcc::StockLevel,
    &crate::tpcc::coordfree::CfNewOrder,
    &crate::tpcc::coordfree::CfNewOrderBounded,
    &crate::tpcc::coordfree::CfPayment,
    &crate::tpcc::coordfree::CfOrderStatus,
    &crate::tpcc::coordfree::CfDelivery { local: true },
    &crate::tpcc::coordfree::CfDelivery { local: false },
    &crate::tpcc::coordfree::CfStockLevel,
];

/// The registered procedure called `name`.
pub fn lookup(name: &str) -> Result<&'static dyn Procedure, String> {
    PROCEDURES.iter().copied().find(|p| p.name() == name).ok_or_else(|| {
        let names: Vec<&str> = PROCEDURES.iter().map(|p| p.name()).collect();
        format!("no stored procedure named {name:?}; registered: {}", names.join(", "))
    })
}

/// Plan a call's first wave and check that it is sane; the error is the message the client sees.
pub fn plan_call(name: &str, args: &[Value]) -> Result<(&'static dyn Procedure, Vec<Piece>), String> {
    let procedure = lookup(name)?;
    let pieces = procedure.plan(args, &[]).map_err(|e| usage_error(procedure, e))?;
    if pieces.iter().all(|p| p.reads.is_empty() && p.writes.is_empty()) {
        return Err(format!("{name}: the call names no key (usage: {})", procedure.usage()));
    }
    Ok((procedure, pieces))
}

fn usage_error(procedure: &dyn Procedure, e: String) -> String {
    format!("{}: {e} (usage: {})", procedure.name(), procedure.usage())
}

/// A call in progress, wave by wave: the pieces planned so far and the outputs known. Every protocol that
/// runs stored procedures drives one (2PL's and OCC's clients, Rococo's coordinator), so the wave contract
/// is kept in one place.
#[derive(Clone, Debug)]
pub struct Call {
    pub procedure: &'static dyn Procedure,
    pub args: Vec<Value>,
    pub pieces: Vec<Piece>,
    pub known: Vec<Option<Vec<Value>>>,
}

impl Call {
    /// Plan the first wave of `name(args)`.
    pub fn start(name: &str, args: Vec<Value>) -> Result<Self, String> {
        let (procedure, pieces) = plan_call(name, &args)?;
        let known = vec![None; pieces.len()];
        Ok(Call { procedure, args, pieces, known })
    }

    /// Record piece `i`'s output.
    pub fn ran(&mut self, i: usize, output: Vec<Value>) {
        if let Some(k) = self.known.get_mut(i) {
            *k = Some(output);
        }
    }

    /// Plan again with what is known; the indices of the new pieces (empty: the plan is complete). A plan
    /// that drops or changes a piece already planned breaks the contract and is an error.
    pub fn next_wave(&mut self) -> Result<std::ops::Range<usize>, String> {
        let planned = self.procedure.plan(&self.args, &self.known).map_err(|e| usage_error(self.procedure, e))?;
        let before = self.pieces.len();
        if planned.len() < before || planned[..before] != self.pieces[..] {
            return Err(format!("{}: a later plan changed pieces already planned", self.procedure.name()));
        }
        self.pieces.extend_from_slice(&planned[before..]);
        self.known.resize(self.pieces.len(), None);
        Ok(before..self.pieces.len())
    }

    /// Run piece `i` on `reads` and record its output; the values of its declared writes.
    pub fn run(&mut self, i: usize, reads: &[Option<Value>]) -> Result<Vec<Value>, PieceError> {
        let ran = self.procedure.run(i, &self.args, &self.known, reads)?;
        let declared = self.pieces.get(i).map_or(0, |p| p.writes.len());
        if ran.writes.len() != declared {
            return Err(PieceError::User(format!(
                "{} piece {i} produced {} values for {declared} declared writes",
                self.procedure.name(),
                ran.writes.len()
            )));
        }
        self.ran(i, ran.output);
        Ok(ran.writes)
    }
}

/// A call's effects in program order: the reads (key, value) and the writes (key, value).
pub type Effects = (Vec<(Key, Option<Value>)>, Vec<(Key, Value)>);

/// Run a whole call at one place, given a way to read a key: what a coordinator that can reach every key
/// itself does. `read` is asked for each wave's keys before the wave runs (2PL takes its locks there); a
/// piece sees the call's own earlier writes.
pub fn run_all(call: &mut Call, mut read: impl FnMut(&Key) -> Option<Value>) -> Result<Effects, PieceError> {
    match run_cached(call, |k| Some(read(k)))? {
        Progress::Done(effects) => Ok(effects),
        Progress::Need(_) => unreachable!("every read is answered"),
    }
}

/// How far [`run_cached`] got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The call ran to its end: its effects.
    Done(Effects),
    /// The next wave needs these keys, which `read` did not have.
    Need(Vec<Key>),
}

/// [`run_all`] over what a caller has read so far: `read` answers `None` for a key it has not read; the
/// first wave with such keys stops the run, naming all of them (a client fetches them and runs the call
/// again from the start: pieces are pure).
pub fn run_cached(
    call: &mut Call,
    mut read: impl FnMut(&Key) -> Option<Option<Value>>,
) -> Result<Progress, PieceError> {
    let (mut reads, mut writes) = (Vec::new(), Vec::<(Key, Value)>::new());
    let mut wave = 0..call.pieces.len();
    while !wave.is_empty() {
        let mut values: Vec<Vec<Option<Value>>> = Vec::new();
        let mut need: Vec<Key> = Vec::new();
        let mut needed: std::collections::BTreeSet<Key> = std::collections::BTreeSet::new();
        for i in wave.clone() {
            let mut vs = Vec::new();
            for k in &call.pieces[i].reads {
                let own = writes.iter().rev().find(|(wk, _)| wk == k).map(|(_, v)| v.clone());
                match own.map(Some).or_else(|| read(k)) {
                    Some(v) => vs.push(v),
                    None => {
                        if needed.insert(k.clone()) {
                            need.push(k.clone());
                        }
                        vs.push(None);
                    }
                }
            }
            values.push(vs);
        }
        if !need.is_empty() {
            return Ok(Progress::Need(need));
        }
        for (i, vs) in wave.zip(values) {
            let keys = call.pieces[i].reads.clone();
            reads.extend(keys.into_iter().zip(vs.iter().cloned()));
            let out = call.run(i, &vs)?;
            writes.extend(call.pieces[i].writes.iter().cloned().zip(out));
        }
        wave = call.next_wave()?;
    }
    Ok(Progress::Done((reads, writes)))
}

/// `rw R k1 … kR k1' v1' …`: the YCSB-style transaction of the NMSI paper's workloads (§V) as a template:
/// read `R` keys, then write the given values (one deferrable piece per key, reads first, all in one wave).
/// The written values come from the arguments, so a client knows them when it invokes the call.
pub struct ReadWrite;

impl Procedure for ReadWrite {
    fn name(&self) -> &'static str {
        "rw"
    }

    fn usage(&self) -> &'static str {
        "rw R KEY×R [KEY VALUE]… (read R keys, then write each KEY=VALUE)"
    }

    fn plan(&self, args: &[Value], _known: &Known) -> Result<Vec<Piece>, String> {
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
            read_keys.iter().map(|k| Piece { reads: vec![k.clone()], ..Piece::default() }).collect();
        pieces.extend(writes.chunks(2).map(|kv| Piece { writes: vec![kv[0].clone()], ..Piece::default() }));
        Ok(pieces)
    }

    fn run(&self, piece: usize, args: &[Value], _known: &Known, _reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let reads: usize = args[0].parse().map_err(|_| "bad read count".to_string())?;
        if piece < reads {
            return Ok(Ran::default());
        }
        let at = 1 + reads + 2 * (piece - reads) + 1;
        let value = args.get(at).ok_or_else(|| format!("piece {piece} has no value"))?;
        Ok(Ran { writes: vec![value.clone()], output: Vec::new() })
    }
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
        let mut call = Call::start("rw", a).unwrap();
        assert_eq!(call.pieces.len(), 4);
        assert_eq!(call.pieces[0].reads, vec![Key::from("x")]);
        assert_eq!(call.pieces[3].writes, vec![Key::from("z")]);
        let (reads, writes) = run_all(&mut call, |k| (&**k == "x").then(|| Value::from("old"))).unwrap();
        assert_eq!(reads, vec![("x".into(), Some("old".into())), ("y".into(), None)]);
        assert_eq!(writes, vec![("y".into(), "v1".into()), ("z".into(), "v2".into())]);
    }

    /// Reads a counter (immediate), then writes the row the counter names: a two-wave plan.
    struct NextRow;
    impl Procedure for NextRow {
        fn name(&self) -> &'static str {
            "next-row"
        }
        fn usage(&self) -> &'static str {
            "next-row VALUE"
        }
        fn plan(&self, _args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
            let mut pieces = vec![Piece { reads: vec!["n".into()], writes: vec!["n".into()], immediate: true }];
            if let Some(Some(out)) = known.first() {
                pieces.push(Piece { writes: vec![format!("row/{}", out[0]).into()], ..Piece::default() });
            }
            Ok(pieces)
        }
        fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
            if piece == 0 {
                let n: u64 = reads[0].as_deref().map_or(Ok(0), str::parse).map_err(|e| format!("{e}"))?;
                return Ok(Ran { writes: vec![(n + 1).to_string().into()], output: vec![n.to_string().into()] });
            }
            let n = known[0].as_ref().ok_or("the counter has not run")?;
            Ok(Ran { writes: vec![args[0].clone()], output: n.clone() })
        }
    }

    #[test]
    fn a_later_wave_names_keys_from_an_immediate_piece_s_output() {
        let mut call = Call { procedure: &NextRow, args: args(&["v"]), pieces: Vec::new(), known: Vec::new() };
        assert_eq!(call.next_wave().unwrap(), 0..1);
        let (reads, writes) = run_all(&mut call, |_| Some(Value::from("7"))).unwrap();
        assert_eq!(reads, vec![("n".into(), Some("7".into()))]);
        assert_eq!(writes, vec![("n".into(), "8".into()), ("row/7".into(), "v".into())]);
        assert_eq!(call.pieces.len(), 2);
        assert_eq!(call.known[1], Some(vec![Value::from("7")]));
    }

    #[test]
    fn bad_calls_are_refused_with_the_usage() {
        assert!(plan_call("nope", &[]).unwrap_err().contains("registered: rw"));
        assert!(plan_call("rw", &args(&["3", "x"])).unwrap_err().contains("usage"));
        assert!(plan_call("rw", &args(&["0", "x"])).unwrap_err().contains("pairs"));
        assert!(plan_call("rw", &args(&["0"])).unwrap_err().contains("no key"));
    }
}
