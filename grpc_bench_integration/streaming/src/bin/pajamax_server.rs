//! The stream bench on pajamax, everything on the worker: `Subscribe` is an
//! iterator pulled as the client's windows allow (`ServerStream::iter`),
//! `Echo` a `BidiHandler` answering each item as it arrives. jemalloc, as
//! the tonic server: the handlers allocate each item's payload, and both
//! servers pay for it with the same allocator.
//!
//! Listens on `0.0.0.0:$STREAMING_BENCH_PORT` (50061) with one worker per
//! CPU given in `GRPC_SERVER_CPUS` (default 1), each pinned to one of the
//! CPUs the process may run on.

use pajamax::{BidiHandler, BidiStream, Context, Responses, ServerStream, Status};
use streaming_bench::pajamax_proto::stream_bench_server::{StreamBench, StreamBenchServer};
use streaming_bench::pajamax_proto::{Ask, Item};
use streaming_bench::{listen_addr, payload, server_cpus, MAX_SIZE};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Bench;

impl StreamBench for Bench {
    fn subscribe(&self, ask: Ask) -> Result<ServerStream<Item>, Status> {
        if ask.size > MAX_SIZE {
            return Err(Status::invalid_argument("size above 1 MiB"));
        }
        let payload = payload(ask.size);
        let items = (0..u64::from(ask.count)).map(move |seq| {
            Ok(Item {
                seq,
                payload: payload.clone(),
            })
        });
        Ok(ServerStream::iter(items))
    }

    fn echo(&self) -> Result<BidiStream<Item, Item>, Status> {
        Ok(BidiStream::on_worker(Echo))
    }
}

/// One `Echo` call.
struct Echo;

impl BidiHandler<Item, Item> for Echo {
    fn on_message(
        &mut self,
        _ctx: &mut Context<'_>,
        item: Item,
        responses: &mut Responses<'_, Item>,
    ) -> Result<(), Status> {
        responses.send(&item);
        Ok(())
    }
}

fn main() -> std::io::Result<()> {
    let workers = server_cpus();
    let addr = listen_addr();
    println!("pajamax stream bench on {addr} with {workers} worker threads");
    pajamax::Server::builder()
        .workers(workers)
        .add_service(StreamBenchServer::new(Bench))
        .serve(addr)
}
