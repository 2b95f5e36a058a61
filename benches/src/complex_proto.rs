//! grpc_bench's `complex_proto` scenario: its `helloworld` messages, as
//! prost-build writes them for `grpc_bench_integration/scenarios/complex_proto/helloworld.proto`,
//! the scenario's payload, and a `helloworld.Greeter` service that answers
//! every `SayHello` with the `Hello` it was sent (what grpc_bench's servers
//! do).
//!
//! The service is written out the way pajamax-build generates it (decode,
//! call the handler, encode the answer), so that this package needs no
//! build script.

use pajamax::{Context, Reply, Service, Status};

/// The scenario's `Hello`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hello {
    /// Field 1.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Field 2.
    #[prost(double, tag = "2")]
    pub d: f64,
    /// Field 3.
    #[prost(float, tag = "3")]
    pub f: f32,
    /// Field 4.
    #[prost(bool, tag = "4")]
    pub b: bool,
    /// Field 5.
    #[prost(int32, tag = "5")]
    pub n: i32,
    /// Field 6.
    #[prost(int64, tag = "6")]
    pub l: i64,
    /// Field 9.
    #[prost(message, repeated, tag = "9")]
    pub pets: Vec<hello::Pet>,
    /// Fields 7 and 8.
    #[prost(oneof = "hello::Choice", tags = "7, 8")]
    pub choice: Option<hello::Choice>,
}

/// The types nested in `Hello`.
pub mod hello {
    /// `Hello.Pet`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Pet {
        /// Field 1.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Field 2, a [`pet::Color`].
        #[prost(enumeration = "pet::Color", tag = "2")]
        pub color: i32,
    }

    /// The types nested in `Pet`.
    pub mod pet {
        /// `Hello.Pet.Color`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
        #[repr(i32)]
        pub enum Color {
            /// 0.
            Black = 0,
            /// 1.
            White = 1,
            /// 2.
            Blue = 2,
            /// 3.
            Red = 3,
            /// 4.
            Yellow = 4,
            /// 5.
            Green = 5,
        }
    }

    /// The `choice` oneof.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Choice {
        /// Field 7.
        #[prost(string, tag = "7")]
        C1(String),
        /// Field 8.
        #[prost(bool, tag = "8")]
        C2(bool),
    }
}

/// `helloworld.HelloRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloRequest {
    /// Field 1.
    #[prost(message, optional, tag = "1")]
    pub request: Option<Hello>,
}

/// `helloworld.HelloReply`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloReply {
    /// Field 1.
    #[prost(message, optional, tag = "1")]
    pub response: Option<Hello>,
}

/// The scenario's payload (its `payload` file, in JSON there).
pub fn payload() -> HelloRequest {
    use hello::pet::Color;
    HelloRequest {
        request: Some(Hello {
            name: "a name".into(),
            d: 4.55332,
            f: 232.3,
            b: true,
            n: 32,
            l: 444_325_235_223,
            choice: Some(hello::Choice::C1("ofcouse".into())),
            pets: vec![
                hello::Pet {
                    name: "Bof the dog".into(),
                    color: Color::Blue as i32,
                },
                hello::Pet {
                    name: "Kim the cat".into(),
                    color: Color::Red as i32,
                },
            ],
        }),
    }
}

/// `helloworld.Greeter` answering every `SayHello` with its request's
/// `Hello`.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoGreeter;

impl EchoGreeter {
    fn say_hello(&self, request: HelloRequest) -> Result<HelloReply, Status> {
        Ok(HelloReply {
            response: request.request,
        })
    }
}

impl Service for EchoGreeter {
    fn name(&self) -> &'static str {
        "helloworld.Greeter"
    }

    fn methods(&self) -> &'static [pajamax::Method] {
        const METHODS: [pajamax::Method; 1] = [pajamax::Method::unary("SayHello")];
        &METHODS
    }

    fn unary(
        &self,
        method: usize,
        _ctx: &mut Context<'_>,
        request: &[u8],
        reply: &mut Reply<'_>,
    ) -> Result<(), Status> {
        match method {
            0 => {
                let request: HelloRequest = pajamax::decode_request(request)?;
                let answer = self.say_hello(request)?;
                reply.encode(&answer);
                Ok(())
            }
            _ => Err(Status::unimplemented("helloworld.Greeter: no such method")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// `protoc --encode=helloworld.HelloRequest` of the scenario's payload.
    const PROTOC_ENCODED: &str = "\
        0a4c0a0661206e616d651111e4a084993612401dcd4c684320012820309794e4\
        9ef70c3a076f66636f7573654a0f0a0b426f662074686520646f6710024a0f0a\
        0b4b696d20746865206361741003";

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn the_payload_encodes_as_protoc_encodes_it() {
        assert_eq!(payload().encode_to_vec(), hex(PROTOC_ENCODED));
    }

    #[test]
    fn the_echo_answers_with_the_request_bytes() {
        // Same field number, same message: the reply is the request's bytes.
        let reply = EchoGreeter.say_hello(payload()).unwrap();
        assert_eq!(reply.encode_to_vec(), payload().encode_to_vec());
    }
}
