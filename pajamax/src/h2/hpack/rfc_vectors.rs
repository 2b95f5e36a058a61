//! Header lists of RFC 7541 Appendix C, shared by the decoder's and the
//! encoder's tests.

/// Appendix C.3.1 / C.4.1.
pub(super) const REQ1: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];

/// Appendix C.3.2 / C.4.2.
pub(super) const REQ2: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];

/// Appendix C.3.3 / C.4.3.
pub(super) const REQ3: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

/// Appendix C.5.1 / C.6.1.
pub(super) const RESP1: [(&str, &str); 4] = [
    (":status", "302"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];

/// Appendix C.5.2 / C.6.2.
pub(super) const RESP2: [(&str, &str); 4] = [
    (":status", "307"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];

/// Appendix C.5.3 / C.6.3.
pub(super) const RESP3: [(&str, &str); 6] = [
    (":status", "200"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ("location", "https://www.example.com"),
    ("content-encoding", "gzip"),
    (
        "set-cookie",
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    ),
];
