//! Frame headers, padding and frame splitting on arbitrary bytes, checked
//! against a plain reading of RFC 9113 section 4.1 and 6.1; then the frame
//! writers, fed values from the input, must produce frames that parse back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pajamax::h2::frame::{
    self, flag, kind, strip_padding, FrameHeader, Reason, HEADER_LEN, MAX_WINDOW,
};

fuzz_target!(|data: &[u8]| {
    check_header(data);
    check_padding(data);
    split_frames(data);
    write_and_parse(data);
});

/// `FrameHeader::parse` reads the 9 bytes as the RFC lays them out, and
/// writing the header back gives the same bytes less the reserved bit.
fn check_header(data: &[u8]) {
    let Some(head) = FrameHeader::parse(data) else {
        assert!(data.len() < HEADER_LEN, "no header parsed from {data:02x?}");
        return;
    };
    assert!(data.len() >= HEADER_LEN);
    let len = u32::from(data[0]) << 16 | u32::from(data[1]) << 8 | u32::from(data[2]);
    let stream = u32::from_be_bytes([data[5], data[6], data[7], data[8]]) & 0x7fff_ffff;
    assert_eq!(head.len, len);
    assert_eq!(head.kind, data[3]);
    assert_eq!(head.flags, data[4]);
    assert_eq!(head.stream, stream);
    assert!(head.stream <= MAX_WINDOW);
    for bit in 0..8 {
        assert_eq!(head.has(1 << bit), data[4] & (1 << bit) != 0);
    }
    let mut written = Vec::new();
    frame::write_header(
        &mut written,
        head.len as usize,
        head.kind,
        head.flags,
        head.stream,
    );
    let mut expected = data[..HEADER_LEN].to_vec();
    expected[5] &= 0x7f;
    assert_eq!(written, expected);
}

/// `strip_padding` accepts exactly the payloads whose pad length fits, and
/// returns what lies between the pad length byte and the padding.
fn check_padding(payload: &[u8]) {
    match strip_padding(payload) {
        None => assert!(
            payload.is_empty() || usize::from(payload[0]) > payload.len() - 1,
            "valid padding rejected: {payload:02x?}"
        ),
        Some((body, used)) => {
            assert!(!payload.is_empty());
            let pad = usize::from(payload[0]);
            assert!(pad < payload.len());
            assert_eq!(used, 1 + pad);
            assert_eq!(body, &payload[1..payload.len() - pad]);
            assert_eq!(body.len() + used, payload.len());
        }
    }
}

/// Splits the input into frames the way a connection does; every byte is
/// in a frame or in the incomplete tail.
fn split_frames(data: &[u8]) -> Vec<(FrameHeader, &[u8])> {
    let mut frames = Vec::new();
    let mut rest = data;
    let mut used = 0;
    while let Some(head) = FrameHeader::parse(rest) {
        let end = HEADER_LEN + head.len as usize;
        if end > rest.len() {
            break;
        }
        let payload = &rest[HEADER_LEN..end];
        if head.has(flag::PADDED) && (head.kind == kind::DATA || head.kind == kind::HEADERS) {
            check_padding(payload);
        }
        frames.push((head, payload));
        rest = &rest[end..];
        used += end;
    }
    assert_eq!(used + rest.len(), data.len());
    if let Some(head) = FrameHeader::parse(rest) {
        assert!(HEADER_LEN + head.len as usize > rest.len());
    }
    frames
}

/// Writes one frame of every kind the server sends, with fields taken from
/// the input, and parses them back.
fn write_and_parse(data: &[u8]) {
    let word = |at: usize| {
        let mut bytes = [0; 4];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = data.get(at + i).copied().unwrap_or(0);
        }
        u32::from_be_bytes(bytes)
    };
    let (stream, value, code) = (word(0), word(4), word(8));
    let reason = Reason(code);
    let _ = format!("{reason:?} {reason}");
    let mut ping = [0; 8];
    for (i, b) in ping.iter_mut().enumerate() {
        *b = data.get(i).copied().unwrap_or(0);
    }
    let params: Vec<(u16, u32)> = data
        .chunks_exact(6)
        .take(16)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    let debug = &data[..data.len().min(1024)];

    let mut out = Vec::new();
    frame::write_settings(&mut out, &params);
    frame::write_settings_ack(&mut out);
    frame::write_ping_ack(&mut out, &ping);
    frame::write_window_update(&mut out, stream, value);
    frame::write_rst_stream(&mut out, stream, reason);
    frame::write_goaway(&mut out, stream, reason, debug);
    let at = out.len();
    frame::write_header(&mut out, 0, kind::DATA, flag::END_STREAM, stream);
    out.extend_from_slice(debug);
    frame::patch_len(&mut out, at, debug.len());

    let frames = split_frames(&out);
    assert_eq!(frames.len(), 7);
    let stream = stream & MAX_WINDOW;

    let (head, payload) = frames[0];
    assert_eq!((head.kind, head.flags, head.stream), (kind::SETTINGS, 0, 0));
    assert_eq!(payload.len(), params.len() * 6);
    for (chunk, (id, value)) in payload.chunks_exact(6).zip(&params) {
        assert_eq!(chunk[..2], id.to_be_bytes());
        assert_eq!(chunk[2..], value.to_be_bytes());
    }

    let (head, payload) = frames[1];
    assert_eq!(
        (head.kind, head.flags, head.stream),
        (kind::SETTINGS, flag::ACK, 0)
    );
    assert!(payload.is_empty());

    let (head, payload) = frames[2];
    assert_eq!(
        (head.kind, head.flags, head.stream),
        (kind::PING, flag::ACK, 0)
    );
    assert_eq!(payload, ping);

    let (head, payload) = frames[3];
    assert_eq!((head.kind, head.stream), (kind::WINDOW_UPDATE, stream));
    assert_eq!(payload, (value & MAX_WINDOW).to_be_bytes());

    let (head, payload) = frames[4];
    assert_eq!((head.kind, head.stream), (kind::RST_STREAM, stream));
    assert_eq!(payload, code.to_be_bytes());

    let (head, payload) = frames[5];
    assert_eq!((head.kind, head.stream), (kind::GOAWAY, 0));
    assert_eq!(payload[..4], stream.to_be_bytes());
    assert_eq!(payload[4..8], code.to_be_bytes());
    assert_eq!(&payload[8..], debug);

    let (head, payload) = frames[6];
    assert_eq!(
        (head.kind, head.flags, head.stream),
        (kind::DATA, flag::END_STREAM, stream)
    );
    assert_eq!(payload, debug);
}
