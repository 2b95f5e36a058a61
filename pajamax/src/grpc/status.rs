//! gRPC status codes and the [`Status`] a handler returns on failure.

use std::borrow::Cow;
use std::fmt;

/// A gRPC status code, as carried in the `grpc-status` trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled, typically by the caller.
    Cancelled = 1,
    /// Unknown error.
    Unknown = 2,
    /// The client specified an invalid argument.
    InvalidArgument = 3,
    /// The deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// Some requested entity was not found.
    NotFound = 5,
    /// The entity that a client attempted to create already exists.
    AlreadyExists = 6,
    /// The caller does not have permission to execute the operation.
    PermissionDenied = 7,
    /// Some resource has been exhausted.
    ResourceExhausted = 8,
    /// The system is not in a state required for the operation.
    FailedPrecondition = 9,
    /// The operation was aborted.
    Aborted = 10,
    /// The operation was attempted past the valid range.
    OutOfRange = 11,
    /// The operation is not implemented or not supported.
    Unimplemented = 12,
    /// Internal error.
    Internal = 13,
    /// The service is currently unavailable.
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request does not have valid authentication credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The code for a numeric value; values outside 0..=16 map to [`Code::Unknown`].
    ///
    /// ```
    /// assert_eq!(pajamax::Code::from_i32(5), pajamax::Code::NotFound);
    /// assert_eq!(pajamax::Code::from_i32(99), pajamax::Code::Unknown);
    /// ```
    pub fn from_i32(value: i32) -> Code {
        use Code::*;
        const ALL: [Code; 17] = [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
        ];
        usize::try_from(value)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .unwrap_or(Unknown)
    }

    /// The decimal text of the code, as sent in `grpc-status`.
    pub fn as_str(self) -> &'static str {
        const TEXT: [&str; 17] = [
            "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
            "16",
        ];
        TEXT[self as usize]
    }
}

impl fmt::Display for Code {
    /// The code's name as the gRPC documents write it, such as `NOT_FOUND`.
    ///
    /// ```
    /// assert_eq!(pajamax::Code::NotFound.to_string(), "NOT_FOUND");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 17] = [
            "OK",
            "CANCELLED",
            "UNKNOWN",
            "INVALID_ARGUMENT",
            "DEADLINE_EXCEEDED",
            "NOT_FOUND",
            "ALREADY_EXISTS",
            "PERMISSION_DENIED",
            "RESOURCE_EXHAUSTED",
            "FAILED_PRECONDITION",
            "ABORTED",
            "OUT_OF_RANGE",
            "UNIMPLEMENTED",
            "INTERNAL",
            "UNAVAILABLE",
            "DATA_LOSS",
            "UNAUTHENTICATED",
        ];
        f.write_str(NAMES[*self as usize])
    }
}

/// The outcome of a failed call: a [`Code`], a human-readable message and,
/// optionally, binary details (rich error details: an encoded
/// `google.rpc.Status`, sent in `grpc-status-details-bin`).
///
/// ```
/// use pajamax::{Code, Status};
/// let status = Status::not_found("no such key");
/// assert_eq!(status.code(), Code::NotFound);
/// assert_eq!(status.message(), "no such key");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    text: Text,
}

/// A status's message, and its details when it has some. One field of 24
/// bytes, so that a status stays 32 bytes: every handler returns a
/// `Result` of it, and a field of its own for the details cost 13
/// instructions per unary call (`benches/whole_server.sh`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Text {
    Borrowed(&'static str),
    Owned(String),
    /// Rare: the message and the details in one box.
    Detailed(Box<(Cow<'static, str>, Vec<u8>)>),
}

impl From<Cow<'static, str>> for Text {
    fn from(message: Cow<'static, str>) -> Text {
        match message {
            Cow::Borrowed(message) => Text::Borrowed(message),
            Cow::Owned(message) => Text::Owned(message),
        }
    }
}

macro_rules! status_constructors {
    ($($(#[$doc:meta])* $name:ident => $code:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $name(message: impl Into<Cow<'static, str>>) -> Status {
                Status::new(Code::$code, message)
            }
        )*
    };
}

impl Status {
    /// A status with the given code and message.
    pub fn new(code: Code, message: impl Into<Cow<'static, str>>) -> Status {
        Status {
            code,
            text: Text::from(message.into()),
        }
    }

    /// A status with binary details, sent base64-encoded in the
    /// `grpc-status-details-bin` trailer: by convention the encoded
    /// `google.rpc.Status` of the same code and message, whose `details`
    /// carry the rich error model's messages (`BadRequest`, `RetryInfo`...),
    /// which clients read back (tonic: `Status::details`).
    ///
    /// ```
    /// use pajamax::{Code, Status};
    /// let status = Status::with_details(Code::InvalidArgument, "bad name", vec![8, 3]);
    /// assert_eq!(status.details(), &[8, 3]);
    /// ```
    pub fn with_details(
        code: Code,
        message: impl Into<Cow<'static, str>>,
        details: impl Into<Vec<u8>>,
    ) -> Status {
        let (message, details) = (message.into(), details.into());
        let text = if details.is_empty() {
            Text::from(message)
        } else {
            Text::Detailed(Box::new((message, details)))
        };
        Status { code, text }
    }

    status_constructors! {
        /// A [`Code::Cancelled`] status.
        cancelled => Cancelled,
        /// A [`Code::Unknown`] status.
        unknown => Unknown,
        /// A [`Code::InvalidArgument`] status.
        invalid_argument => InvalidArgument,
        /// A [`Code::DeadlineExceeded`] status.
        deadline_exceeded => DeadlineExceeded,
        /// A [`Code::NotFound`] status.
        not_found => NotFound,
        /// A [`Code::AlreadyExists`] status.
        already_exists => AlreadyExists,
        /// A [`Code::PermissionDenied`] status.
        permission_denied => PermissionDenied,
        /// A [`Code::ResourceExhausted`] status.
        resource_exhausted => ResourceExhausted,
        /// A [`Code::FailedPrecondition`] status.
        failed_precondition => FailedPrecondition,
        /// A [`Code::Aborted`] status.
        aborted => Aborted,
        /// A [`Code::OutOfRange`] status.
        out_of_range => OutOfRange,
        /// A [`Code::Unimplemented`] status.
        unimplemented => Unimplemented,
        /// A [`Code::Internal`] status.
        internal => Internal,
        /// A [`Code::Unavailable`] status.
        unavailable => Unavailable,
        /// A [`Code::DataLoss`] status.
        data_loss => DataLoss,
        /// A [`Code::Unauthenticated`] status.
        unauthenticated => Unauthenticated,
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message, before percent-encoding.
    pub fn message(&self) -> &str {
        match &self.text {
            Text::Borrowed(message) => message,
            Text::Owned(message) => message,
            Text::Detailed(detailed) => &detailed.0,
        }
    }

    /// The binary details, before base64-encoding; empty without any.
    pub fn details(&self) -> &[u8] {
        match &self.text {
            Text::Detailed(detailed) => &detailed.1,
            _ => &[],
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status {:?}: {}", self.code, self.message())
    }
}

impl std::error::Error for Status {}

/// An I/O error as a status, for a handler that ends with `?`: its text as
/// the message, and the code its kind suggests (`NOT_FOUND`,
/// `PERMISSION_DENIED`, `ALREADY_EXISTS`, `INVALID_ARGUMENT` for invalid
/// input or data, `DEADLINE_EXCEEDED` for a time-out, `UNIMPLEMENTED` for
/// an unsupported operation, `RESOURCE_EXHAUSTED` when out of memory or
/// space, `UNAVAILABLE` for a connection refused, reset or aborted, else
/// `INTERNAL`).
///
/// ```
/// fn read_config(path: &str) -> Result<String, pajamax::Status> {
///     Ok(std::fs::read_to_string(path)?)
/// }
/// let status = read_config("/no/such/file").unwrap_err();
/// assert_eq!(status.code(), pajamax::Code::NotFound);
/// ```
impl From<std::io::Error> for Status {
    fn from(err: std::io::Error) -> Status {
        use std::io::ErrorKind::*;
        let code = match err.kind() {
            NotFound => Code::NotFound,
            PermissionDenied => Code::PermissionDenied,
            AlreadyExists => Code::AlreadyExists,
            InvalidInput | InvalidData => Code::InvalidArgument,
            TimedOut => Code::DeadlineExceeded,
            Unsupported => Code::Unimplemented,
            OutOfMemory | StorageFull | QuotaExceeded => Code::ResourceExhausted,
            ConnectionRefused | ConnectionReset | ConnectionAborted | NotConnected | BrokenPipe => {
                Code::Unavailable
            }
            _ => Code::Internal,
        };
        Status::new(code, err.to_string())
    }
}

/// A message that does not decode is `INTERNAL`, as the gRPC status codes
/// guide lists "error parsing request proto", and as tonic and grpc-go
/// answer it.
impl From<prost::DecodeError> for Status {
    fn from(err: prost::DecodeError) -> Status {
        Status::internal(format!("failed to decode request: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_become_the_status_their_kind_suggests() {
        use std::io::{Error, ErrorKind};
        let cases = [
            (ErrorKind::NotFound, Code::NotFound),
            (ErrorKind::PermissionDenied, Code::PermissionDenied),
            (ErrorKind::AlreadyExists, Code::AlreadyExists),
            (ErrorKind::InvalidData, Code::InvalidArgument),
            (ErrorKind::TimedOut, Code::DeadlineExceeded),
            (ErrorKind::Unsupported, Code::Unimplemented),
            (ErrorKind::StorageFull, Code::ResourceExhausted),
            (ErrorKind::ConnectionReset, Code::Unavailable),
            (ErrorKind::Other, Code::Internal),
        ];
        for (kind, code) in cases {
            let status = Status::from(Error::new(kind, "what happened"));
            assert_eq!(status.code(), code, "{kind:?}");
            assert_eq!(status.message(), "what happened");
        }
    }

    #[test]
    fn every_code_displays_its_name() {
        let names: Vec<String> = (0..17).map(|n| Code::from_i32(n).to_string()).collect();
        assert_eq!(names[0], "OK");
        assert_eq!(names[4], "DEADLINE_EXCEEDED");
        assert_eq!(names[16], "UNAUTHENTICATED");
        let unique: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 17);
    }

    #[test]
    fn a_status_stays_small() {
        assert_eq!(std::mem::size_of::<Status>(), 32);
        let detailed = Status::with_details(Code::Aborted, format!("{}", 7), vec![1]);
        assert_eq!((detailed.message(), detailed.details()), ("7", &[1][..]));
        let plain = Status::with_details(Code::Aborted, "x", Vec::new());
        assert_eq!(plain, Status::aborted("x"));
    }

    #[test]
    fn codes_round_trip_through_their_numbers() {
        for n in 0..=16 {
            let code = Code::from_i32(n);
            assert_eq!(code as i32, n);
            assert_eq!(code.as_str(), n.to_string());
        }
        assert_eq!(Code::from_i32(-1), Code::Unknown);
        assert_eq!(Code::from_i32(17), Code::Unknown);
    }
}
