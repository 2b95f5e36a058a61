//! Shared code of pajamax's benchmarks (the criterion benches live in
//! `benches/`): grpc_bench's `complex_proto` messages, a greeter that echoes
//! them, and the bytes a grpc-go client sends for them.

pub mod complex_proto;
pub mod pipeline;
