//! Merge writes: a write that says how to change a row's fields instead of replacing the row, so that
//! concurrent writers of one row commute (the coordination-avoidance paper's counters, §5.2: "a simple counter
//! ADT can be built from a single integer that is incremented for each corresponding user-level increment
//! operation"). A store that supports them (RAMP: `docs/COORDINATION.md`) keeps a merge as a version like any
//! other and gives readers the row *materialized*: the fold, in version order, of the latest put at or below
//! the version read and every merge above it.
//!
//! # Encoding
//!
//! A merge value is `merge:` then one operation per field, `,`-separated, then optionally `;TAG` (the
//! write's unique tag, as every written value in a recorded run has):
//!
//! | op | meaning |
//! | --- | --- |
//! | `+N` / `-N` | add / subtract the integer `N` (a missing or empty field counts as 0) |
//! | `-N>=F` / `+N>=F` | add as above, and the field must stay at least `F`: a *bounded* add, which the store checks at the row's owner before it accepts the write (a write that would break the bound is refused; `docs/COORDINATION.md`) |
//! | `=` | keep the field |
//! | `:X` | set the field to `X` (last writer in version order wins, as for a put) |
//! | `@X` | append `X` to the field's space-separated list |
//!
//! `X` contains no `,` or `;`. A row (a put's value) is `FIELD,FIELD,…` then optionally `;TAG`; the
//! materialized value of a version is the folded fields and the tag of that version.

/// The prefix that makes a value a merge.
pub const PREFIX: &str = "merge:";

/// Whether `value` is a merge.
pub fn is_merge(value: &str) -> bool {
    value.starts_with(PREFIX)
}

/// One field operation of a merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldOp<'a> {
    Add(i64),
    /// Add `add`, keeping the field at least `floor`: folded as an add; the bound is the store's to keep
    /// ([`bounds`]).
    Bounded {
        add: i64,
        floor: i64,
    },
    Keep,
    Set(&'a str),
    Append(&'a str),
}

/// The fields part of a value (before `;TAG`) and its tag.
pub fn split_tag(value: &str) -> (&str, Option<&str>) {
    match value.split_once(';') {
        Some((f, t)) => (f, Some(t)),
        None => (value, None),
    }
}

/// The operations of merge `value`; `Err` says what is malformed.
pub fn ops(value: &str) -> Result<Vec<FieldOp<'_>>, String> {
    let body = value.strip_prefix(PREFIX).ok_or_else(|| format!("{value:?} is not a merge (no {PREFIX:?})"))?;
    let (fields, _) = split_tag(body);
    fields
        .split(',')
        .map(|f| {
            let mut chars = f.chars();
            match chars.next() {
                Some('+') | Some('-') => match f.split_once(">=") {
                    None => {
                        f.parse::<i64>().map(FieldOp::Add).map_err(|_| format!("merge field {f:?} is not +N or -N"))
                    }
                    Some((add, floor)) => match (add.parse::<i64>(), floor.parse::<i64>()) {
                        (Ok(add), Ok(floor)) => Ok(FieldOp::Bounded { add, floor }),
                        _ => Err(format!("merge field {f:?} is not a bounded add (-N>=F)")),
                    },
                },
                Some('=') if f.len() == 1 => Ok(FieldOp::Keep),
                Some(':') => Ok(FieldOp::Set(&f[1..])),
                Some('@') => Ok(FieldOp::Append(&f[1..])),
                _ => Err(format!("merge field {f:?}: expected +N, -N, =, :X or @X")),
            }
        })
        .collect()
}

/// Apply merge `delta` to the fields of `base` (`None`: the row was never written); the resulting fields
/// (without a tag).
pub fn apply(base: Option<&str>, delta: &str) -> Result<String, String> {
    let ops = ops(delta)?;
    let base_fields: Vec<&str> = match base {
        Some(b) => split_tag(b).0.split(',').collect(),
        None => Vec::new(),
    };
    let n = ops.len().max(base_fields.len());
    let mut out: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        let old = base_fields.get(i).copied().unwrap_or("");
        let new = match ops.get(i) {
            None | Some(FieldOp::Keep) => old.to_owned(),
            Some(FieldOp::Set(x)) => (*x).to_owned(),
            Some(FieldOp::Append(x)) if old.is_empty() => (*x).to_owned(),
            Some(FieldOp::Append(x)) => format!("{old} {x}"),
            Some(FieldOp::Add(d)) | Some(FieldOp::Bounded { add: d, .. }) => {
                let o: i64 = if old.is_empty() {
                    0
                } else {
                    old.parse().map_err(|_| format!("field {i} ({old:?}) is not a number; cannot add {d}"))?
                };
                o.checked_add(*d).ok_or_else(|| format!("field {i}: {o} + {d} overflows"))?.to_string()
            }
        };
        out.push(new);
    }
    Ok(out.join(","))
}

/// A merge value from its field operations and tag.
pub fn encode(ops: &[FieldOp<'_>], tag: &str) -> String {
    let fields: Vec<String> = ops
        .iter()
        .map(|op| match op {
            FieldOp::Add(d) if *d >= 0 => format!("+{d}"),
            FieldOp::Add(d) => d.to_string(),
            FieldOp::Bounded { add, floor } if *add >= 0 => format!("+{add}>={floor}"),
            FieldOp::Bounded { add, floor } => format!("{add}>={floor}"),
            FieldOp::Keep => "=".into(),
            FieldOp::Set(x) => format!(":{x}"),
            FieldOp::Append(x) => format!("@{x}"),
        })
        .collect();
    format!("{PREFIX}{};{tag}", fields.join(","))
}

/// The bounded adds of merge `value`: `(field, add, floor)` for each (none for a put or a malformed merge).
pub fn bounds(value: &str) -> Vec<(usize, i64, i64)> {
    if !is_merge(value) {
        return Vec::new();
    }
    ops(value)
        .map(|ops| {
            ops.iter()
                .enumerate()
                .filter_map(|(i, op)| match op {
                    FieldOp::Bounded { add, floor } => Some((i, *add, *floor)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The change merge `value` makes to field `field` if it is an add (bounded or not); `None` if it sets,
/// appends or is not a merge (a put replaces the row).
pub fn field_add(value: &str, field: usize) -> Option<i64> {
    let ops = ops(value).ok()?;
    match ops.get(field) {
        None | Some(FieldOp::Keep) => Some(0),
        Some(FieldOp::Add(d)) | Some(FieldOp::Bounded { add: d, .. }) => Some(*d),
        Some(_) => None,
    }
}

/// Fold `versions` (oldest first: puts and merges) onto `base`: the fields after the last one.
pub fn fold<'a>(base: Option<&'a str>, versions: impl IntoIterator<Item = &'a str>) -> Result<Option<String>, String> {
    let mut current: Option<String> = base.map(|b| split_tag(b).0.to_owned());
    for v in versions {
        current = Some(if is_merge(v) { apply(current.as_deref(), v)? } else { split_tag(v).0.to_owned() });
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_add_keep_set_and_append() {
        let d = encode(&[FieldOp::Add(-5), FieldOp::Keep, FieldOp::Set("BC"), FieldOp::Append("1.2.300")], "t.1");
        assert_eq!(d, "merge:-5,=,:BC,@1.2.300;t.1");
        assert_eq!(apply(Some("10,7,GC,;load.3"), &d).unwrap(), "5,7,BC,1.2.300");
        assert_eq!(apply(Some("10,7,GC,0.1.5"), &d).unwrap(), "5,7,BC,0.1.5 1.2.300");
        assert_eq!(apply(None, "merge:+1,=").unwrap(), "1,");
    }

    #[test]
    fn concurrent_increments_commute_and_a_put_resets() {
        let a = "merge:+3;a";
        let b = "merge:-1,+2;b";
        let ab = fold(Some("10,0;x"), [a, b]).unwrap();
        let ba = fold(Some("10,0;x"), [b, a]).unwrap();
        assert_eq!(ab, ba);
        assert_eq!(ab.as_deref(), Some("12,2"));
        assert_eq!(fold(Some("10,0"), [a, "1,1;p", b]).unwrap().as_deref(), Some("0,3"));
    }

    #[test]
    fn bounded_adds_fold_as_adds_and_name_their_floor() {
        let d = encode(&[FieldOp::Bounded { add: -4, floor: 10 }, FieldOp::Add(4)], "t");
        assert_eq!(d, "merge:-4>=10,+4;t");
        assert_eq!(ops(&d).unwrap()[0], FieldOp::Bounded { add: -4, floor: 10 });
        assert_eq!(apply(Some("15,0"), &d).unwrap(), "11,4");
        assert_eq!(bounds(&d), vec![(0, -4, 10)]);
        assert_eq!(field_add(&d, 0), Some(-4));
        assert_eq!(field_add(&d, 5), Some(0));
        assert_eq!(field_add("merge::x", 0), None);
        assert!(bounds("15,0").is_empty());
        assert!(ops("merge:-4>=x").unwrap_err().contains("bounded add"));
    }

    #[test]
    fn malformed_merges_are_refused_with_the_field() {
        assert!(ops("merge:+x").unwrap_err().contains("+x"));
        assert!(ops("merge:==").unwrap_err().contains("=="));
        assert!(ops("plain").is_err());
        assert!(apply(Some("abc"), "merge:+1").unwrap_err().contains("not a number"));
        assert!(apply(Some(&i64::MAX.to_string()), "merge:+1").unwrap_err().contains("overflows"));
    }
}
