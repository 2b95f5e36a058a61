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
