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

/// The outcome of a failed call: a [`Code`] and a human-readable message.
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
    message: Cow<'static, str>,
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
            message: message.into(),
        }
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
        &self.message
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status {:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

impl From<prost::DecodeError> for Status {
    fn from(err: prost::DecodeError) -> Status {
        Status::invalid_argument(format!("failed to decode request: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
