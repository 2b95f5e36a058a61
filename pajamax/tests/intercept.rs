//! Interceptors and call observers with tonic's client.

mod common;

use common::streams::{self, server_stream, Ask, Streams};
use common::{call, connect, text, Probe};
use pajamax::grpc::intercept::{CallInfo, FinishedCall, Intercepted};
use pajamax::{Code, Context, Status};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn api_key(_: &CallInfo<'_>, ctx: &mut Context<'_>) -> Result<(), Status> {
    match ctx.metadata().get("x-api-key") {
        Some("secret") => {
            ctx.headers_mut().insert("x-checked", "yes").unwrap();
            Ok(())
        }
        _ => Err(Status::unauthenticated("a valid x-api-key is required")),
    }
}

fn keyed(text_sent: &str, key: Option<&str>) -> tonic::Request<common::ProbeRequest> {
    let mut request = text(text_sent);
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("x-api-key", key.parse().unwrap());
    }
    request
}

#[tokio::test]
async fn an_interceptor_rejects_calls_before_their_handler_and_adds_metadata() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let infos = seen.clone();
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .intercept(move |info: &CallInfo<'_>, _: &mut Context<'_>| {
            infos
                .lock()
                .unwrap()
                .push(format!("{}/{}", info.service, info.method));
            Ok(())
        })
        .intercept(api_key)
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Echo", keyed("no key", None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let status = call(channel.clone(), "Echo", keyed("bad key", Some("guess")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let reply = call(channel.clone(), "Echo", keyed("good", Some("secret")))
        .await
        .unwrap();
    assert_eq!(reply.get_ref().text, "good");
    assert_eq!(reply.metadata().get("x-checked").unwrap(), "yes");
    // A streaming call passes the same interceptors.
    let status = server_stream(
        channel.clone(),
        "Count",
        tonic::Request::new(Ask::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [
            "test.Probe/Echo",
            "test.Probe/Echo",
            "test.Probe/Echo",
            "test.Streams/Count"
        ]
    );
    common::stop(server).await;
}

#[tokio::test]
async fn a_rejected_call_never_reaches_its_handler() {
    let (server, seen) = streams::start(pajamax::Server::builder().workers(1).intercept(
        |_: &CallInfo<'_>, _: &mut Context<'_>| Err(Status::permission_denied("closed")),
    ));
    let channel = connect(&server).await;
    let mut request = tonic::Request::new(Ask {
        count: 5,
        ..Ask::default()
    });
    request.set_timeout(Duration::from_secs(5));
    let status = server_stream(channel.clone(), "CountThread", request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // CountThread's handler starts a thread that counts itself done, or
    // counts its sends cancelled if the call ended under it.
    assert_eq!(seen.threads_done.load(Ordering::SeqCst), 0);
    assert_eq!(seen.sends_cancelled.load(Ordering::SeqCst), 0);
    common::stop(server).await;
}

#[tokio::test]
async fn an_intercepted_service_is_the_only_one_checked() {
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .add_service(Intercepted::new(Probe, api_key))
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    let status = call(channel.clone(), "Echo", keyed("x", None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(call(channel.clone(), "Echo", keyed("x", Some("secret")))
        .await
        .is_ok());
    // The other service does not ask for a key.
    let reply = common::streams_unary(channel, 5).await.unwrap();
    assert_eq!(reply.get_ref().value, 5);
    common::stop(server).await;
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    method: String,
    code: Code,
    request_bytes: u64,
    response_bytes: u64,
}

#[tokio::test]
async fn observers_see_every_answered_call() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let record = calls.clone();
    let longest = Arc::new(AtomicUsize::new(0));
    let slowest = longest.clone();
    let server = pajamax::Server::builder()
        .workers(1)
        .pin_workers(false)
        .observe(move |call: &FinishedCall<'_>| {
            slowest.fetch_max(call.duration.as_millis() as usize, Ordering::SeqCst);
            record.lock().unwrap().push(Seen {
                method: format!("{}/{}", call.service, call.method),
                code: call.code,
                request_bytes: call.request_bytes,
                response_bytes: call.response_bytes,
            });
        })
        .add_service(Probe)
        .add_service(Streams {
            seen: Default::default(),
        })
        .bind("127.0.0.1:0")
        .unwrap();
    let channel = connect(&server).await;
    call(channel.clone(), "Echo", text("hi")).await.unwrap();
    let mut failing = text("no");
    failing.get_mut().code = 5;
    call(channel.clone(), "Fail", failing).await.unwrap_err();
    let sleepy = tonic::Request::new(common::ProbeRequest {
        sleep_ms: 30,
        ..Default::default()
    });
    call(channel.clone(), "Sleep", sleepy).await.unwrap();
    let response = server_stream(
        channel.clone(),
        "Count",
        tonic::Request::new(Ask {
            count: 3,
            size: 10,
            ..Ask::default()
        }),
    )
    .await
    .unwrap();
    let (items, end, _) = streams::collect(response.into_inner()).await;
    end.unwrap();
    assert_eq!(items.len(), 3);
    common::call_path(channel.clone(), "/test.Probe/Nope", text("?"))
        .await
        .unwrap_err();
    // Published on the worker after each answer; wait for the last one.
    for _ in 0..100 {
        if calls.lock().unwrap().len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let calls = calls.lock().unwrap().clone();
    let methods: Vec<_> = calls.iter().map(|c| (c.method.as_str(), c.code)).collect();
    assert_eq!(
        methods,
        [
            ("test.Probe/Echo", Code::Ok),
            ("test.Probe/Fail", Code::NotFound),
            ("test.Probe/Sleep", Code::Ok),
            ("test.Streams/Count", Code::Ok),
            ("test.Probe/Nope", Code::Unimplemented),
        ]
    );
    // "hi" as a ProbeRequest: 4 bytes, plus the prefix; the reply echoes it.
    assert_eq!(calls[0].request_bytes, 4 + 5);
    assert!(calls[0].response_bytes > 5);
    // Three items of 10 bytes, each 2 + 10 + 2 encoded, prefixed.
    assert_eq!(calls[3].response_bytes, 3 * (14 + 5));
    assert!(
        longest.load(Ordering::SeqCst) >= 30,
        "the sleep is in the duration"
    );
    common::stop(server).await;
}
