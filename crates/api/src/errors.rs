//! An operation's outcome as a gRPC status: a closed set of kinds (the `snowline-error` metadata entry),
//! the abort cause (`snowline-abort-cause`), and a status code that follows the kind (docs/API.md).

use snowline_core::{AbortCause, OpError};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

/// The closed set of error kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The transaction aborted for a reason that may not recur (a conflict, a failed certification or vote,
    /// a deadlock victim, a timeout at a participant): running it again may commit.
    Conflict,
    /// Aborted for a reason a retry does not change (the application's own abort, a bound it would break).
    Aborted,
    /// A write's outcome is unknown: it may still take effect (timeout, a lost connection).
    OutcomeUnknown,
    /// The protocol does not offer this kind of request.
    NotOffered,
    /// The request is malformed or out of bounds; it had no effect.
    InvalidArgument,
    /// The endpoint cannot serve now (servers unreachable, its session budget spent); no effect.
    Unavailable,
    /// The session is not open at this endpoint (closed, expired, or opened elsewhere).
    UnknownSession,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Conflict => "conflict",
            Kind::Aborted => "aborted",
            Kind::OutcomeUnknown => "outcome-unknown",
            Kind::NotOffered => "not-offered",
            Kind::InvalidArgument => "invalid-argument",
            Kind::Unavailable => "unavailable",
            Kind::UnknownSession => "unknown-session",
        }
    }

    fn code(self) -> Code {
        match self {
            Kind::Conflict | Kind::Aborted => Code::Aborted,
            Kind::OutcomeUnknown => Code::Unknown,
            Kind::NotOffered => Code::Unimplemented,
            Kind::InvalidArgument => Code::InvalidArgument,
            Kind::Unavailable => Code::Unavailable,
            Kind::UnknownSession => Code::NotFound,
        }
    }
}

/// A status of `kind` saying `message`.
pub fn status(kind: Kind, message: impl Into<String>) -> Status {
    with_code(kind, kind.code(), message, None)
}

fn with_code(kind: Kind, code: Code, message: impl Into<String>, cause: Option<AbortCause>) -> Status {
    let mut md = MetadataMap::new();
    md.insert("snowline-error", MetadataValue::from_static(kind.name()));
    if let Some(cause) = cause {
        md.insert("snowline-abort-cause", MetadataValue::from_static(cause.name()));
    }
    Status::with_metadata(code, message, md)
}

/// The session budget is spent: RESOURCE_EXHAUSTED, kind unavailable.
pub fn exhausted(message: impl Into<String>) -> Status {
    with_code(Kind::Unavailable, Code::ResourceExhausted, message, None)
}

/// The status of an operation that failed with `error`. `read_only`: the operation certainly had no
/// effect, so an unknown outcome is only unavailability. `deadline`: the caller's deadline, not the
/// store's timeout, ran out.
pub fn from_op_error(error: OpError, read_only: bool, deadline: bool) -> Status {
    match error {
        OpError::Rejected(m) => status(Kind::InvalidArgument, m),
        OpError::Aborted(a) => {
            let kind = if a.cause == AbortCause::User { Kind::Aborted } else { Kind::Conflict };
            with_code(kind, Code::Aborted, format!("aborted ({}): {}", a.cause, a.detail), Some(a.cause))
        }
        OpError::Unknown(m) if read_only => status(Kind::Unavailable, format!("the read did not complete: {m}")),
        OpError::Unknown(m) if deadline => {
            with_code(Kind::OutcomeUnknown, Code::DeadlineExceeded, format!("outcome unknown: {m}"), None)
        }
        OpError::Unknown(m) => status(Kind::OutcomeUnknown, format!("outcome unknown: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &Status) -> &str {
        s.metadata().get("snowline-error").unwrap().to_str().unwrap()
    }

    #[test]
    fn aborts_carry_their_cause_and_retryability() {
        let s = from_op_error(OpError::aborted(AbortCause::Certification, "x wrote k"), false, false);
        assert_eq!((s.code(), kind(&s)), (Code::Aborted, "conflict"));
        assert_eq!(s.metadata().get("snowline-abort-cause").unwrap(), "certification");
        let s = from_op_error(OpError::aborted(AbortCause::User, "below its floor"), false, false);
        assert_eq!((s.code(), kind(&s)), (Code::Aborted, "aborted"));
    }

    #[test]
    fn unknown_outcomes_depend_on_what_the_operation_could_do() {
        let s = from_op_error(OpError::Unknown("timed out".into()), true, false);
        assert_eq!((s.code(), kind(&s)), (Code::Unavailable, "unavailable"));
        let s = from_op_error(OpError::Unknown("timed out".into()), false, true);
        assert_eq!((s.code(), kind(&s)), (Code::DeadlineExceeded, "outcome-unknown"));
        let s = from_op_error(OpError::Unknown("connection lost".into()), false, false);
        assert_eq!((s.code(), kind(&s)), (Code::Unknown, "outcome-unknown"));
        let s = from_op_error(OpError::Rejected("empty key".into()), false, false);
        assert_eq!((s.code(), kind(&s)), (Code::InvalidArgument, "invalid-argument"));
    }
}
