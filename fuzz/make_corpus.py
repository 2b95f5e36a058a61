#!/usr/bin/env python3
"""Writes the seed corpus under fuzz/corpus/<target>/.

The seeds are hand-built valid inputs that take each target past its first
checks: real gRPC requests, control frames, and the header blocks of
RFC 7541 Appendix C. Run it from anywhere; it rewrites the files it owns
and leaves other files in the corpus alone.
"""

import gzip
import os
import struct
import zlib

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0x0, 0x1, 0x2, 0x3, 0x4
PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x6, 0x7, 0x8, 0x9
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def hexbytes(text):
    return bytes.fromhex("".join(text.split()))


# ----- HTTP/2 and HPACK -----


def frame(kind, flags, stream, payload=b""):
    head = struct.pack(">I", len(payload))[1:]
    return head + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(params=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", i, v) for i, v in params))


def integer(value, prefix, flags):
    """An HPACK integer (RFC 7541 section 5.1)."""
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([flags | value])
    out = [flags | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def string(text):
    return integer(len(text), 7, 0) + text


def literal(name, value, index=0, incremental=False):
    """A literal field; `index` names a static table entry for the name."""
    prefix, flags = (6, 0x40) if incremental else (4, 0x00)
    if index:
        return integer(index, prefix, flags) + string(value)
    return integer(0, prefix, flags) + string(name) + string(value)


def request_block(path, method_post=True, content_type=b"application/grpc", extra=(), gzip=False):
    """A request's header block; with `gzip`, `grpc-accept-encoding: gzip`
    (indexed, so later blocks may name it by one byte)."""
    block = bytes([0x83 if method_post else 0x82, 0x86])  # :method, :scheme http
    block += literal(b":path", path, index=4, incremental=True)
    block += literal(b":authority", b"localhost", index=1, incremental=True)
    if content_type:
        block += literal(b"content-type", content_type, index=31, incremental=True)
    block += literal(b"te", b"trailers")
    if gzip:
        block += literal(b"grpc-accept-encoding", b"gzip", incremental=True)
    for name, value in extra:
        block += literal(name, value)
    return block


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def gzip_message(payload):
    """A message compressed with gzip (flag 1), as a client sends it after
    `grpc-encoding: gzip`."""
    packed = gzip.compress(payload, mtime=0)
    return b"\x01" + struct.pack(">I", len(packed)) + packed


def deflate_message(payload):
    """A message compressed with deflate (the zlib format, flag 1), as a
    client sends it after `grpc-encoding: deflate`."""
    packed = zlib.compress(payload)
    return b"\x01" + struct.pack(">I", len(packed)) + packed


def bytes_message(data):
    """A protobuf message with `data` as field 1 (`bytes`)."""
    return b"\x0a" + bytes([len(data)]) + data


def connection_seed(body, control=0, reads=()):
    """The server_connection layout: control byte, split count, read
    lengths, client bytes."""
    out = bytes([control, len(reads)])
    for n in reads:
        out += struct.pack("<H", n)
    return out + body


def call(stream, path, message, extra=(), gzip=False, framed=None):
    """A unary call; `framed` is its message with its prefix, if not
    `message` uncompressed."""
    body = framed if framed is not None else grpc_message(message)
    return frame(HEADERS, END_HEADERS, stream, request_block(path, extra=extra, gzip=gzip)) + frame(
        DATA, END_STREAM, stream, body
    )


def stream_call(stream, path, messages, cuts=(), end=True, extra=(), gzip=False):
    """HEADERS, then `messages` as one body cut into DATA frames at the
    offsets in `cuts`; END_STREAM on the last one if `end`."""
    out = frame(HEADERS, END_HEADERS, stream, request_block(path, extra=extra, gzip=gzip))
    body = b"".join(grpc_message(m) for m in messages)
    start = 0
    pieces = []
    for cut in list(cuts) + [len(body)]:
        pieces.append(body[start:cut])
        start = cut
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        out += frame(DATA, END_STREAM if (last and end) else 0, stream, piece)
    return out


# Control bits of server_connection (see the target's header).
PRIMED, TIGHT, HALF_WRITES = 0x01, 0x02, 0x04
GOAWAY_AFTER_1, GOAWAY_AFTER_2 = 0x08, 0x10
CLOCK_1MS, CLOCK_10MS, CLOCK_1S = 0x20, 0x40, 0x60
SWEEP = 0x80
# Bits of the sweep byte that follows the control byte with SWEEP.
END_DRAINING_AFTER_1, END_DRAINING_AFTER_2 = 0x01, 0x02
FORGIVE, KEEPALIVE = 0x04, 0x08
CLOSE_WITH_STATUS_AFTER_1 = 0x10
CLOSE_AT_END, DRAIN_TIMEOUT = 0x40, 0x80


def swept_seed(body, control, sweep, reads=()):
    """As `connection_seed`, with the sweep byte after the control byte."""
    seed = connection_seed(body, control | SWEEP, reads)
    return seed[:1] + bytes([sweep]) + seed[1:]


def server_connection():
    hello = PREFACE + settings()
    echo = call(1, b"/fuzz.Echo/Echo", bytes_message(b"hello"))
    write("server_connection", "echo_unary", connection_seed(hello + echo))

    body = call(1, b"/e.E/Raw", b"raw bytes") + call(3, b"/e.E/Fail", b"\x05not found %")
    write("server_connection", "raw_and_fail_split", connection_seed(body, 0x01, (5, 20, 7)))

    block = request_block(b"/fuzz.Echo/Echo")
    padded = bytes([3]) + grpc_message(bytes_message(b"abc")) + b"\x00" * 3
    body = (
        settings([(0x1, 0), (0x4, 0), (0x5, 16384), (0x3, 100)])
        + frame(SETTINGS, ACK, 0)
        + frame(PING, 0, 0, b"12345678")
        + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20))
        + frame(PRIORITY, 0, 1, struct.pack(">IB", 0, 16))
        + frame(HEADERS, 0, 1, block[:6])
        + frame(CONTINUATION, END_HEADERS, 1, block[6:])
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 65535))
        + frame(DATA, PADDED, 1, padded)
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, literal(b"x-trailer", b"1"))
        + frame(HEADERS, END_HEADERS, 3, request_block(b"/e.E/Echo"))
        + frame(RST_STREAM, 0, 3, struct.pack(">I", 8))
        + frame(GOAWAY, 0, 0, struct.pack(">II", 3, 0))
    )
    write("server_connection", "control_frames", connection_seed(body, 0x01))

    body = (
        frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block(b"/", method_post=False, content_type=b""))
        + call(3, b"/fuzz.Echo/Nope", b"")
        + call(5, b"/x.Y/Z", b"")
        + call(7, b"/e.E/Echo", b"", extra=[(b"grpc-encoding", b"gzip")])
        + frame(HEADERS, END_HEADERS, 9, request_block(b"/e.E/Raw"))
        + frame(DATA, 0, 9, b"\x00\x00\x00\x00\x08" + b"ab")
        + frame(DATA, END_STREAM, 9, b"cdefgh")
    )
    write("server_connection", "errors_and_chunked_body", connection_seed(body, 0x01))

    body = (
        call(1, b"/e.E/Meta", b"abc", extra=[(b"x-custom", b"v"), (b"grpc-timeout", b"100m")])
        + call(3, b"/e.E/Panic", b"")
        + call(5, b"/e.E/Raw", b"late", extra=[(b"grpc-timeout", b"0n")])
        + call(7, b"/e.E/Raw", b"x" * 100)
    )
    write("server_connection", "meta_panic_deadline_tight", connection_seed(body, 0x03))

    first = call(1, b"/e.E/Raw", b"before")
    body = first + frame(PING, ACK, 0, b"pjmx-bye") + call(3, b"/e.E/Raw", b"after")
    write("server_connection", "graceful_shutdown", connection_seed(body, 0x09, (len(PREFACE) + 9 + len(first),)))

    # Server streaming: Split in pieces of 3, Split ending with an error
    # status at its third piece, Tick paced by a clock of 10 ms per read.
    body = (
        call(1, b"/fuzz.Echo/Split", bytes_message(b"\x02abcdefghij"))
        + call(3, b"/e.E/Split", bytes_message(b"\x00ab\xff\x05"))
        + call(5, b"/e.E/Tick", bytes_message(b"\x01\x02\x03\x00\x05"))
        + frame(PING, 0, 0, b"tick-tok")
    )
    write("server_connection", "streaming_server", connection_seed(body, PRIMED | CLOCK_10MS, (60, 60, 30)))

    # Client streaming: messages cut across DATA frames; a message asking
    # for INVALID_ARGUMENT; one that does not decode; a panicking handler;
    # trailers from the client ending the stream.
    body = (
        stream_call(1, b"/fuzz.Echo/Sum", [bytes_message(b"one"), bytes_message(b""), bytes_message(b"three")], cuts=(3, 9, 10))
        + stream_call(3, b"/e.E/Sum", [bytes_message(b"ok"), bytes_message(b"\xff\x03")])
        + stream_call(5, b"/e.E/Sum", [b"\x0a\x09ab"])
        + stream_call(7, b"/e.E/Sum", [bytes_message(b"\xfe")])
        + stream_call(9, b"/e.E/Sum", [bytes_message(b"x")], end=False)
        + frame(HEADERS, END_HEADERS | END_STREAM, 9, literal(b"x-trailer", b"1"))
    )
    write("server_connection", "streaming_client", connection_seed(body, PRIMED, (40,)))

    # Bidirectional: answers of 0 to 2 copies, headers asked for by an
    # empty message, a call reset by the client half-way, one refused at
    # the start, an error status from the handler.
    chat = [bytes_message(m) for m in (b"", b"a", b"bb", b"ccc")]
    body = (
        stream_call(1, b"/fuzz.Echo/Chat", chat, cuts=(7, 15), end=False)
        + frame(DATA, END_STREAM, 1, b"")
        + stream_call(3, b"/e.E/Chat", chat[:2], end=False)
        + frame(RST_STREAM, 0, 3, struct.pack(">I", 8))
        + stream_call(5, b"/e.E/Chat", chat[1:2], extra=[(b"x-refuse", b"1")])
        + stream_call(7, b"/e.E/Chat", [bytes_message(b"hi"), bytes_message(b"\xff\x09"), bytes_message(b"late")])
    )
    write("server_connection", "streaming_bidi", connection_seed(body, PRIMED, (50, 100)))

    # Tight limits and an 8-byte stream window: a long Split waits for the
    # client's WINDOW_UPDATEs, sent in later reads; a paced Tick with a
    # deadline of 5 ms, which passes on the 1 s clock.
    body = (
        settings([(0x4, 8)])
        + call(1, b"/e.E/Split", bytes_message(b"\x07" + bytes(range(1, 41))))
        + call(3, b"/e.E/Tick", bytes_message(b"\x03\x03\x03"), extra=[(b"grpc-timeout", b"5m")])
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 16))
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 64))
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1000))
    )
    hello = len(PREFACE) + 9 + 15
    write("server_connection", "streaming_tight_windows", connection_seed(body, PRIMED | TIGHT | CLOCK_1S, (hello + 120, 13, 13)))

    # Header blocks in pieces: a request cut into HEADERS and three
    # CONTINUATION frames (one empty), its trailers cut in two, and a
    # request whose block is cut across reads; a CONTINUATION that breaks
    # the rules at the end.
    block = request_block(b"/e.E/Sum")
    body = (
        frame(HEADERS, 0, 1, block[:3])
        + frame(CONTINUATION, 0, 1, block[3:10])
        + frame(CONTINUATION, 0, 1, b"")
        + frame(CONTINUATION, END_HEADERS, 1, block[10:])
        + frame(DATA, 0, 1, grpc_message(bytes_message(b"piece")))
        + frame(HEADERS, END_STREAM, 1, literal(b"x-trailer", b"1")[:2])
        + frame(CONTINUATION, END_HEADERS, 1, literal(b"x-trailer", b"1")[2:])
    )
    block = request_block(b"/e.E/Raw")
    cut = frame(HEADERS, END_STREAM, 3, block[:4]) + frame(CONTINUATION, END_HEADERS, 3, block[4:])
    reads = (len(PREFACE) + 9 + len(body) + 16, len(cut) - 16)
    body += cut + frame(CONTINUATION, END_HEADERS, 3, b"")
    write("server_connection", "continuations", connection_seed(body, PRIMED, reads))

    # A graceful shutdown whose PING the client never answers: the second
    # GOAWAY goes after read 2 (end_draining). A call on its way in read 2
    # is served, the one after the GOAWAY refused; then a connection error.
    first = stream_call(1, b"/e.E/Sum", [bytes_message(b"a")], end=False)
    second = call(3, b"/e.E/Raw", b"on its way")
    third = (
        call(5, b"/e.E/Raw", b"too late")
        + frame(DATA, END_STREAM, 1, b"")
        + frame(PING, 0, 1, b"12345678")
    )
    hello = len(PREFACE) + 9
    write(
        "server_connection",
        "drain_unanswered",
        swept_seed(first + second + third, PRIMED | GOAWAY_AFTER_1, END_DRAINING_AFTER_2, (hello + len(first), len(second))),
    )

    # A long bidi call and keepalive PINGs, more than the tight budget of
    # frames that move no request forward: forgiven after every read.
    pings = b"".join(frame(PING, 0, 0, b"keep%04d" % i) for i in range(10))
    opening = stream_call(1, b"/e.E/Chat", [bytes_message(b"hi")], end=False)
    body = opening + pings + pings + pings + frame(DATA, END_STREAM, 1, b"")
    hello = len(PREFACE) + 9
    write(
        "server_connection",
        "forgiven_keepalive",
        swept_seed(body, PRIMED | TIGHT, FORGIVE | KEEPALIVE, (hello + len(opening) + len(pings), len(pings), len(pings))),
    )

    # The end of a shutdown's grace period after read 1: a paced server
    # stream, a client stream and a unary call waiting for its body end
    # with UNAVAILABLE; what the client sends next is ignored.
    body = (
        call(1, b"/e.E/Tick", bytes_message(b"\x03\x03\x03\x03"))
        + stream_call(3, b"/e.E/Sum", [bytes_message(b"a")], end=False)
        + frame(HEADERS, END_HEADERS, 5, request_block(b"/e.E/Echo"))
    )
    later = frame(DATA, END_STREAM, 3, b"") + call(7, b"/e.E/Raw", b"after")
    write(
        "server_connection",
        "grace_period_over",
        swept_seed(body + later, PRIMED | GOAWAY_AFTER_1 | CLOCK_1MS, CLOSE_WITH_STATUS_AFTER_1, (len(PREFACE) + 9 + len(body),)),
    )

    # A graceful shutdown while a paced stream runs, with no PING answer:
    # the second GOAWAY goes once the connection drained for 5 s of the
    # final rounds; an idle connection closed at the end in another seed.
    body = call(1, b"/e.E/Tick", bytes_message(b"\x01\x02\x03")) + stream_call(3, b"/e.E/Chat", [bytes_message(b"x")], end=False)
    write("server_connection", "drain_timeout", swept_seed(body, PRIMED | GOAWAY_AFTER_1 | CLOCK_1S, DRAIN_TIMEOUT))
    write("server_connection", "idle_close", swept_seed(body, PRIMED | GOAWAY_AFTER_1, CLOSE_AT_END))

    compression_seeds()


# The echo service's choice bytes (see `Choice` in fuzz/src/echo.rs): the
# first byte of a message, or a byte of Tick's request.
CHOICE = 0xE0
COMPRESS, NO_COMPRESS, UNCOMPRESSED, CUT = 0x01, 0x02, 0x04, 0x08


def choice(*bits):
    out = CHOICE
    for bit in bits:
        out |= bit
    return bytes([out])


def compression_seeds():
    """Answers compressed for clients that accept gzip, messages sent
    uncompressed among them, and answers whose encoding panics halfway."""
    hello = len(PREFACE) + 9

    # Unary: compression chosen by the handler for a client that accepts
    # gzip (Raw; Echo with a compressed request), turned off again, asked
    # for by a client that does not accept it; answers whose encoding
    # panics, in a compressed call and in one answered in place.
    body = (
        call(1, b"/e.E/Raw", choice(COMPRESS) + b"squeeze squeeze squeeze", gzip=True)
        + call(
            3,
            b"/fuzz.Echo/Echo",
            b"",
            gzip=True,
            extra=[(b"grpc-encoding", b"gzip")],
            framed=gzip_message(bytes_message(choice(COMPRESS) + b"hello hello")),
        )
        + call(5, b"/e.E/Raw", choice(COMPRESS, NO_COMPRESS) + b"plain", gzip=True)
        + call(7, b"/e.E/Raw", choice(COMPRESS) + b"not accepted")
        + call(9, b"/e.E/Raw", choice(COMPRESS, CUT) + b"cut short", gzip=True)
        + call(11, b"/e.E/Echo", bytes_message(choice(CUT) + b"cut in place"))
    )
    write("server_connection", "compressed_unary", connection_seed(body, PRIMED, (hello + 120,)))

    # Streams that compress: Chat answers compressed, then copies sent
    # uncompressed and compressed in turn, messages cut across DATA frames;
    # a Chat whose copy's encoding panics after whole ones (INTERNAL); Tick
    # with bytes that go uncompressed; Split whose third piece panics in
    # its encoding; Sum answered compressed.
    chat = [
        choice(COMPRESS) + b"a",
        choice(UNCOMPRESSED) + b"x",
        choice(UNCOMPRESSED) + b"yzw",
        b"ok",
    ]
    body = (
        stream_call(1, b"/e.E/Chat", [bytes_message(m) for m in chat], cuts=(6, 13, 20), gzip=True)
        + stream_call(
            3,
            b"/e.E/Chat",
            [bytes_message(choice(COMPRESS, UNCOMPRESSED) + b"q"), bytes_message(choice(UNCOMPRESSED, CUT) + b"p"), bytes_message(b"late")],
            gzip=True,
        )
        + call(5, b"/e.E/Tick", bytes_message(choice(COMPRESS) + choice(UNCOMPRESSED) + b"\x01" + choice(COMPRESS, UNCOMPRESSED) + b"\x02"), gzip=True)
        + call(7, b"/e.E/Split", bytes_message(choice(COMPRESS) + b"ab" + b"cd" + choice(CUT) + b"e" + b"fg"), gzip=True)
        + stream_call(9, b"/e.E/Sum", [bytes_message(choice(COMPRESS) + b"a"), bytes_message(b"bc")], gzip=True)
    )
    write("server_connection", "compressed_streams", connection_seed(body, PRIMED | CLOCK_1MS, (hello + 90, 80, 200)))

    # Calls that do not compress (no grpc-accept-encoding): copies marked
    # to go uncompressed have their mark written over; compression asked
    # for in vain; a copy whose encoding panics after a whole one marked
    # to go uncompressed; Tick bytes sent with Next::Uncompressed, then
    # one whose encoding panics; Sum whose answer's encoding panics. Half
    # the output written at a time.
    body = (
        stream_call(
            1,
            b"/e.E/Chat",
            [bytes_message(choice(UNCOMPRESSED) + b"a"), bytes_message(choice(COMPRESS) + b"b"), bytes_message(choice(UNCOMPRESSED, CUT) + b"c")],
            cuts=(3, 10),
        )
        + call(3, b"/e.E/Tick", bytes_message(choice(UNCOMPRESSED) + b"\x01" + choice(UNCOMPRESSED, COMPRESS) + choice(CUT) + b"\x02"))
        + stream_call(5, b"/e.E/Sum", [bytes_message(b"a"), bytes_message(choice(CUT))])
    )
    write("server_connection", "uncompressed_marks", connection_seed(body, PRIMED | HALF_WRITES | CLOCK_10MS, (hello + 60, 60)))

    # Tight limits and an 8-byte stream window: compressed Split pieces
    # held back by the window and cut across DATA frames, let out by
    # WINDOW_UPDATEs in later reads; a Chat whose headers went before it
    # asked for compression (too late: its answers stay uncompressed), and
    # one that compresses from its first message, its copies held back by
    # the window too.
    body = (
        settings([(0x4, 8)])
        + call(1, b"/e.E/Split", bytes_message(choice(COMPRESS) + bytes(range(1, 25))), gzip=True)
        + stream_call(3, b"/e.E/Chat", [b"", bytes_message(choice(COMPRESS) + b"z")], gzip=True)
        + stream_call(5, b"/e.E/Chat", [bytes_message(choice(COMPRESS, UNCOMPRESSED) + b"y"), bytes_message(b"xx")], end=False, gzip=True)
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 16))
        + frame(WINDOW_UPDATE, 0, 5, struct.pack(">I", 40))
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1000))
        + frame(WINDOW_UPDATE, 0, 3, struct.pack(">I", 100))
        + frame(DATA, END_STREAM, 5, b"")
    )
    write("server_connection", "compressed_tight_windows", connection_seed(body, PRIMED | TIGHT | CLOCK_1S, (hello + 15 + 260, 13, 13)))

    # Deflate: a client that accepts deflate only, answered with it (Raw);
    # a request compressed with deflate, answered with it by a client that
    # accepts both; a Chat whose answers are deflated, copies among them
    # uncompressed; a stream that says deflate but sends gzip (INTERNAL).
    deflate_only = [(b"grpc-accept-encoding", b"deflate")]
    both_deflate = [(b"grpc-accept-encoding", b"gzip,deflate"), (b"grpc-encoding", b"deflate")]
    body = (
        call(1, b"/e.E/Raw", choice(COMPRESS) + b"deflate deflate deflate", extra=deflate_only)
        + call(
            3,
            b"/fuzz.Echo/Echo",
            b"",
            extra=both_deflate,
            framed=deflate_message(bytes_message(choice(COMPRESS) + b"inflate me")),
        )
        + stream_call(5, b"/e.E/Chat", [bytes_message(choice(COMPRESS) + b"d"), bytes_message(choice(UNCOMPRESSED) + b"e")], cuts=(4,), extra=deflate_only)
        + call(7, b"/fuzz.Echo/Echo", b"", extra=both_deflate, framed=gzip_message(bytes_message(b"gzip, not deflate")))
    )
    write("server_connection", "compressed_deflate", connection_seed(body, PRIMED | CLOCK_1MS, (hello + 100, 120)))


def hpack_decoder():
    def seed(control, blocks, size=None):
        out = bytes([control])
        if size is not None:
            out += struct.pack("<H", size)
        for block in blocks:
            if len(block) < 255:
                out += bytes([len(block)])
            else:
                out += b"\xff" + struct.pack("<H", len(block))
            out += block
        return out

    c2 = [
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        "040c 2f73 616d 706c 652f 7061 7468",
        "1008 7061 7373 776f 7264 0673 6563 7265 74",
        "82",
    ]
    c3 = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]
    c4 = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]
    c5 = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230"
        "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65"
        "7861 6d70 6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220"
        "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157"
        "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076"
        "6572 7369 6f6e 3d31",
    ]
    c6 = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0"
        "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b"
        "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27"
        "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]
    write("hpack_decoder", "rfc7541_c2", seed(0x10, [hexbytes(b) for b in c2]))
    write("hpack_decoder", "rfc7541_c3", seed(0x00, [hexbytes(b) for b in c3]))
    write("hpack_decoder", "rfc7541_c4", seed(0x20, [hexbytes(b) for b in c4]))
    # C.5 and C.6 run with a 256-byte table (SIZES[5]).
    write("hpack_decoder", "rfc7541_c5", seed(0x05, [hexbytes(b) for b in c5]))
    write("hpack_decoder", "rfc7541_c6", seed(0x75, [hexbytes(b) for b in c6]))
    # Size updates: down to 0 and back up, then a field; a custom limit of 100.
    grpc = request_block(b"/helloworld.Greeter/SayHello")
    write(
        "hpack_decoder",
        "size_updates",
        seed(0x08, [integer(0, 5, 0x20) + integer(100, 5, 0x20) + grpc, grpc], size=100),
    )


def frame_parser():
    write("frame_parser", "preface_settings", PREFACE + settings([(0x3, 100), (0x4, 1 << 20)]))
    write(
        "frame_parser",
        "padded_frames",
        frame(DATA, PADDED | END_STREAM, 1, b"\x02ab\x00\x00")
        + frame(HEADERS, PADDED | END_HEADERS, 3, b"\x01" + request_block(b"/a.B/C") + b"\x00")
        + frame(DATA, PADDED, 5, b"\x09short"),
    )
    write(
        "frame_parser",
        "control_frames",
        frame(PING, 0, 0, b"12345678")
        + frame(WINDOW_UPDATE, 0, 0x80000001, struct.pack(">I", 0x80001000))
        + frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
        + frame(GOAWAY, 0, 0, struct.pack(">II", 7, 11) + b"debug")
        + frame(0xff, 0xff, 0x7fffffff, b"x")[:11],
    )


if __name__ == "__main__":
    server_connection()
    hpack_decoder()
    frame_parser()
