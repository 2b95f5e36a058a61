#!/usr/bin/env node
// gRPC interop cases for scripts/interop-node.sh, on gRPC's pure-JavaScript
// client (@grpc/grpc-js over Node's http2 module, which is nghttp2), written
// from gRPC's interop test descriptions (doc/interop-test-descriptions.md in
// the grpc repository), plus cases of our own.
//
// Usage:
//   node interop_client.js --server_host=HOST --server_port=PORT \
//       --proto_dir=DIR --test_case=CASE
//   node interop_client.js --list
//
// DIR holds grpc/testing/test.proto and what it imports; the protos are
// loaded at run time with @grpc/proto-loader. One case is run per process;
// it prints "CASE: ok" (with what it saw) and exits 0, or prints why it
// failed and exits 1.
//
// grpc-js decompresses what it receives and hides the messages' compressed
// flag, so before any channel connects, `http2.connect` is wrapped (see
// `tapHttp2`): every HTTP/2 stream the client opens is recorded with its
// request and response headers, its trailers and the flag and length of each
// gRPC message it sent and received, as they went on the wire. The
// compression cases check those flags; other cases check the headers and
// trailers there as well as through grpc-js.
'use strict';

const http2 = require('node:http2');
const path = require('node:path');

const tap = tapHttp2();

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// ----- wire tap -----

/**
 * Wraps `http2.connect` so that each session's streams are recorded, in the
 * order they are opened. Returns `{ sessions, streams, open, mostOpen }`:
 * the number of sessions (connections) opened, one record per stream, and
 * how many streams are open, and were at most at once. A stream's record is
 * `{ path, request, response, trailers, sent, received, reset, stream }`:
 * the request headers; the response headers (null until they come); the
 * trailers (null unless trailers follow the headers: a Trailers-Only answer
 * has its status in `response`); `{ flag, length }` of each gRPC message
 * sent and received (the compressed-flag byte and the length of its 5-byte
 * prefix); the RST_STREAM code the stream closed with (0 when it closed
 * normally); and Node's ClientHttp2Stream itself. While `rewrite` is set,
 * it is given the request headers of each new stream and returns those to
 * send; while `onStream` is set, it is given each new stream's record.
 */
function tapHttp2() {
    const record = {
        sessions: 0,
        streams: [],
        open: 0,
        mostOpen: 0,
        rewrite: null,
        onStream: null,
    };
    const connect = http2.connect;
    http2.connect = function (...args) {
        const session = connect.apply(this, args);
        record.sessions += 1;
        const request = session.request;
        session.request = function (headers, ...rest) {
            if (record.rewrite) {
                headers = record.rewrite(headers);
            }
            const stream = request.call(this, headers, ...rest);
            const entry = {
                path: headers[':path'],
                request: headers,
                response: null,
                trailers: null,
                sent: [],
                received: [],
                reset: null,
                stream,
            };
            record.streams.push(entry);
            if (record.onStream) {
                record.onStream(entry);
            }
            record.open += 1;
            record.mostOpen = Math.max(record.mostOpen, record.open);
            const sentParser = messagePrefixes(entry.sent);
            const write = stream.write;
            stream.write = function (chunk, ...more) {
                if (Buffer.isBuffer(chunk)) {
                    sentParser(chunk);
                }
                return write.call(this, chunk, ...more);
            };
            const receivedParser = messagePrefixes(entry.received);
            stream.on('response', (response) => {
                entry.response = response;
            });
            stream.on('trailers', (trailers) => {
                entry.trailers = trailers;
            });
            stream.on('data', receivedParser);
            stream.on('close', () => {
                entry.reset = stream.rstCode;
                record.open -= 1;
            });
            return stream;
        };
        return session;
    };
    return record;
}

/**
 * A function that reads a byte stream of length-prefixed gRPC messages, in
 * chunks cut anywhere, and pushes `{ flag, length }` of each message to
 * `out` as its prefix completes.
 */
function messagePrefixes(out) {
    let prefix = Buffer.alloc(0);
    let skip = 0;
    return (chunk) => {
        let at = 0;
        while (at < chunk.length) {
            if (skip > 0) {
                const n = Math.min(skip, chunk.length - at);
                skip -= n;
                at += n;
                continue;
            }
            const need = 5 - prefix.length;
            const take = chunk.subarray(at, at + need);
            prefix = Buffer.concat([prefix, take]);
            at += take.length;
            if (prefix.length === 5) {
                const length = prefix.readUInt32BE(1);
                out.push({ flag: prefix[0], length });
                skip = length;
                prefix = Buffer.alloc(0);
            }
        }
    };
}

/** The streams opened since stream number `from` of the tap. */
function streamsSince(from) {
    return tap.streams.slice(from);
}

// ----- arguments, protos, channels -----

function parseArgs(argv) {
    const args = {};
    for (const arg of argv) {
        const m = /^--([a-z_]+)(?:=(.*))?$/.exec(arg);
        if (!m) {
            throw new Error(`unknown argument ${JSON.stringify(arg)}`);
        }
        args[m[1]] = m[2] === undefined ? 'true' : m[2];
    }
    return args;
}

let services = null;
let target = null;

function loadServices(protoDir) {
    const definition = protoLoader.loadSync('grpc/testing/test.proto', {
        includeDirs: [protoDir],
        keepCase: true,
        enums: String,
        defaults: true,
    });
    const loaded = grpc.loadPackageDefinition(definition).grpc.testing;
    return { TestService: loaded.TestService, UnimplementedService: loaded.UnimplementedService };
}

/**
 * A client of `service` (default TestService) on a channel of its own,
 * with its own connection; `gzip` makes the channel compress what it sends.
 */
function newClient({ service = 'TestService', gzip = false } = {}) {
    const options = {
        'grpc.use_local_subchannel_pool': 1,
        'grpc.max_receive_message_length': 16 << 20,
    };
    if (gzip) {
        options['grpc.default_compression_algorithm'] = grpc.compressionAlgorithms.gzip;
    }
    return new services[service](target, grpc.credentials.createInsecure(), options);
}

// ----- checks -----

class CheckFailed extends Error {}

/** Fails the case with `message` unless `condition`. */
function check(condition, message) {
    if (!condition) {
        throw new CheckFailed(message);
    }
}

/** Fails the case unless `actual` and `expected` are the same (===). */
function checkEqual(actual, expected, what) {
    check(actual === expected, `${what}: got ${show(actual)}, want ${show(expected)}`);
}

function show(value) {
    if (Buffer.isBuffer(value)) {
        return `0x${value.toString('hex')}`;
    }
    return JSON.stringify(value);
}

/** `n` bytes of zeros. */
function zeros(n) {
    return Buffer.alloc(n);
}

/** Checks that `payload` is a COMPRESSABLE payload of `size` zero bytes. */
function checkPayload(payload, size, what) {
    check(payload, `${what}: no payload`);
    checkEqual(payload.type, 'COMPRESSABLE', `${what}: payload type`);
    checkEqual(payload.body.length, size, `${what}: payload size`);
    check(
        payload.body.every((b) => b === 0),
        `${what}: payload of ${size} bytes is not all zeros`,
    );
}

/** Checks that a call ended with `code` (and `details` when given). */
function checkStatus(status, code, details, what) {
    check(status, `${what}: no status`);
    check(
        status.code === code,
        `${what}: status ${status.code} (${show(status.details)}), want ${code}`,
    );
    if (details !== undefined) {
        checkEqual(status.details, details, `${what}: status message`);
    }
}

// ----- calls -----

/**
 * Makes unary call `method` of `client` with `request`. Resolves, once the
 * call has its status, to `{ response, status, headers }`: the answer (null
 * on an error), the status with its trailers (`status.metadata`) and the
 * response headers (null when none came).
 */
function unary(client, method, request, { metadata = new grpc.Metadata(), deadline } = {}) {
    return new Promise((resolve) => {
        let response;
        let status;
        let headers = null;
        const done = () => {
            if (response !== undefined && status !== undefined) {
                resolve({ response, status, headers });
            }
        };
        const options = deadline === undefined ? {} : { deadline };
        const call = client[method](request, metadata, options, (err, answer) => {
            response = err ? null : answer;
            done();
        });
        call.on('metadata', (md) => {
            headers = md;
        });
        call.on('status', (s) => {
            status = s;
            done();
        });
    });
}

/**
 * Follows a call that sends messages to the client (server streaming or
 * bidirectional): `next()` resolves to the next message, or to null once
 * the client has them all; `status` resolves to the call's status, and
 * `headers()` gives the response headers (null until they come).
 */
function follow(call) {
    const queue = [];
    const waiting = [];
    let ended = false;
    let headers = null;
    const settle = () => {
        while (waiting.length > 0 && (queue.length > 0 || ended)) {
            waiting.shift()(queue.length > 0 ? queue.shift() : null);
        }
    };
    call.on('data', (message) => {
        queue.push(message);
        settle();
    });
    call.on('metadata', (md) => {
        headers = md;
    });
    // An error comes with the status too; the status is what is checked.
    call.on('error', () => {});
    // The status may come while messages are still buffered in the stream:
    // the messages end with the stream's 'end', which grpc-js brings about
    // with every status, OK or not.
    call.on('end', () => {
        ended = true;
        settle();
    });
    const status = new Promise((resolve) => {
        call.on('status', resolve);
    });
    return {
        next: () =>
            new Promise((resolve) => {
                waiting.push(resolve);
                settle();
            }),
        status,
        headers: () => headers,
    };
}

/** Reads every message of `followed` until the call ends. */
async function readAll(followed) {
    const messages = [];
    for (;;) {
        const message = await followed.next();
        if (message === null) {
            return messages;
        }
        messages.push(message);
    }
}

/**
 * Starts a client-streaming call `method`; resolves, once it has a status,
 * to `{ response, status }`. `send(call)` writes the requests and ends the
 * call (or cancels it).
 */
function clientStreaming(client, method, send, { metadata = new grpc.Metadata() } = {}) {
    return new Promise((resolve) => {
        let response;
        let status;
        const done = () => {
            if (response !== undefined && status !== undefined) {
                resolve({ response, status });
            }
        };
        const call = client[method](metadata, (err, answer) => {
            response = err ? null : answer;
            done();
        });
        call.on('status', (s) => {
            status = s;
            done();
        });
        send(call);
    });
}

/** A promise resolved after `ms` milliseconds. */
function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Write flag of grpc-js: send this message uncompressed. */
const NO_COMPRESS = 2;

const LARGE_REQUEST = {
    response_size: 314159,
    payload: { body: zeros(271828) },
};

/** large_unary's call and checks, on `client`; `what` names it in failures. */
async function largeUnary(client, what = 'large_unary') {
    const { response, status } = await unary(client, 'UnaryCall', LARGE_REQUEST);
    checkStatus(status, grpc.status.OK, undefined, what);
    checkPayload(response.payload, 314159, what);
}

/** ping_pong's exchanges: the size of each answer, and of its request's payload. */
const PING_PONG = [
    [31415, 27182],
    [9, 8],
    [2653, 1828],
    [58979, 45904],
];

/**
 * ping_pong's call and checks, on `client`: each request sent once the
 * answer to the one before has come; `what` names it in failures.
 */
async function pingPong(client, what = 'ping_pong') {
    const call = client.FullDuplexCall();
    const followed = follow(call);
    for (const [size, body] of PING_PONG) {
        call.write({ response_parameters: [{ size }], payload: { body: zeros(body) } });
        const answer = await followed.next();
        check(answer !== null, `${what}: the call ended before the answer of size ${size}`);
        checkPayload(answer.payload, size, `${what}: answer of size ${size}`);
    }
    call.end();
    const extra = await followed.next();
    check(extra === null, `${what}: an answer more than the four asked for`);
    checkStatus(await followed.status, grpc.status.OK, undefined, what);
}

/** Checks that the server still answers on `client`'s channel. */
async function stillServing(client, what) {
    const { response, status } = await unary(client, 'EmptyCall', {});
    checkStatus(status, grpc.status.OK, undefined, `${what}: a later EmptyCall`);
    check(response, `${what}: a later EmptyCall has no answer`);
}

// ----- cases -----

/**
 * The cases, by name. Each runs its calls, throws CheckFailed on anything
 * amiss, and returns a short line of what it saw.
 */
const CASES = {
    async empty_unary() {
        const client = newClient();
        const { response, status } = await unary(client, 'EmptyCall', {});
        checkStatus(status, grpc.status.OK, undefined, 'EmptyCall');
        check(response !== null && typeof response === 'object', 'EmptyCall: no answer');
        const [stream] = tap.streams;
        checkEqual(stream.received.length, 1, 'EmptyCall: messages received');
        checkEqual(stream.received[0].length, 0, 'EmptyCall: length of the answer');
        return 'an empty answer (0 bytes on the wire)';
    },

    async large_unary() {
        await largeUnary(newClient());
        return '314159 zero bytes back';
    },

    async client_compressed_unary() {
        const plain = newClient();
        const gzip = newClient({ gzip: true });
        const request = (expect) => ({ ...LARGE_REQUEST, expect_compressed: { value: expect } });
        const mark = tap.streams.length;

        // The probe: uncompressed, but expected to be compressed.
        const probe = await unary(plain, 'UnaryCall', request(true));
        checkStatus(
            probe.status,
            grpc.status.INVALID_ARGUMENT,
            undefined,
            'the uncompressed probe',
        );
        const compressed = await unary(gzip, 'UnaryCall', request(true));
        checkStatus(compressed.status, grpc.status.OK, undefined, 'the compressed call');
        checkPayload(compressed.response.payload, 314159, 'the compressed call');
        const uncompressed = await unary(plain, 'UnaryCall', request(false));
        checkStatus(uncompressed.status, grpc.status.OK, undefined, 'the uncompressed call');
        checkPayload(uncompressed.response.payload, 314159, 'the uncompressed call');

        // What went on the wire: flags 0, 1, 0; gzip named on the second.
        const streams = streamsSince(mark);
        checkEqual(streams.length, 3, 'streams opened');
        const flags = streams.map((s) => s.sent.map((m) => m.flag).join(',')).join(' ');
        checkEqual(flags, '0 1 0', 'compressed flags of the requests');
        checkEqual(
            streams[1].request['grpc-encoding'],
            'gzip',
            'grpc-encoding of the compressed call',
        );
        check(
            streams[1].sent[0].length < 271828 / 10,
            `the compressed request is ${streams[1].sent[0].length} bytes`,
        );
        return `probe INVALID_ARGUMENT, then OK compressed and uncompressed (request flags ${flags})`;
    },

    async server_compressed_unary() {
        const client = newClient();
        const mark = tap.streams.length;
        const flags = [];
        for (const compressed of [true, false]) {
            const what = `response_compressed ${compressed}`;
            const { response, status } = await unary(client, 'UnaryCall', {
                ...LARGE_REQUEST,
                response_compressed: { value: compressed },
            });
            checkStatus(status, grpc.status.OK, undefined, what);
            checkPayload(response.payload, 314159, what);
            const stream = tap.streams[tap.streams.length - 1];
            checkEqual(stream.received.length, 1, `${what}: messages received`);
            const flag = stream.received[0].flag;
            flags.push(flag);
            checkEqual(flag, compressed ? 1 : 0, `${what}: compressed flag of the answer`);
            if (compressed) {
                checkEqual(stream.response['grpc-encoding'], 'gzip', `${what}: grpc-encoding`);
                check(
                    stream.received[0].length < 314159 / 10,
                    `${what}: the answer is ${stream.received[0].length} bytes on the wire`,
                );
            }
        }
        checkEqual(streamsSince(mark).length, 2, 'streams opened');
        return `answer flags ${flags.join(' ')}`;
    },

    async client_streaming() {
        const { response, status } = await clientStreaming(
            newClient(),
            'StreamingInputCall',
            (call) => {
                for (const size of [27182, 8, 1828, 45904]) {
                    call.write({ payload: { body: zeros(size) } });
                }
                call.end();
            },
        );
        checkStatus(status, grpc.status.OK, undefined, 'StreamingInputCall');
        checkEqual(response.aggregated_payload_size, 74922, 'aggregated_payload_size');
        return 'aggregated_payload_size 74922';
    },

    async client_compressed_streaming() {
        const mark = tap.streams.length;
        // The probe: uncompressed, expected to be compressed.
        const probe = await clientStreaming(newClient(), 'StreamingInputCall', (call) => {
            call.write({ expect_compressed: { value: true }, payload: { body: zeros(27182) } });
            call.end();
        });
        checkStatus(
            probe.status,
            grpc.status.INVALID_ARGUMENT,
            undefined,
            'the uncompressed probe',
        );

        const { response, status } = await clientStreaming(
            newClient({ gzip: true }),
            'StreamingInputCall',
            (call) => {
                call.write({ expect_compressed: { value: true }, payload: { body: zeros(27182) } });
                call.write(
                    { expect_compressed: { value: false }, payload: { body: zeros(45904) } },
                    NO_COMPRESS,
                );
                call.end();
            },
        );
        checkStatus(status, grpc.status.OK, undefined, 'the compressed stream');
        checkEqual(response.aggregated_payload_size, 73086, 'aggregated_payload_size');

        const streams = streamsSince(mark);
        checkEqual(streams.length, 2, 'streams opened');
        const flags = streams.map((s) => s.sent.map((m) => m.flag).join(',')).join(' ');
        checkEqual(flags, '0 1,0', 'compressed flags of the requests');
        return `probe INVALID_ARGUMENT, then aggregated_payload_size 73086 (request flags ${flags})`;
    },

    async server_streaming() {
        const sizes = [31415, 9, 2653, 58979];
        const call = newClient().StreamingOutputCall({
            response_parameters: sizes.map((size) => ({ size })),
        });
        const followed = follow(call);
        const messages = await readAll(followed);
        checkStatus(await followed.status, grpc.status.OK, undefined, 'StreamingOutputCall');
        checkEqual(messages.length, sizes.length, 'answers');
        messages.forEach((m, i) => checkPayload(m.payload, sizes[i], `answer ${i}`));
        return `answers of ${sizes.join(', ')} bytes`;
    },

    async server_compressed_streaming() {
        const sizes = [31415, 92653];
        const call = newClient().StreamingOutputCall({
            response_parameters: [
                { compressed: { value: true }, size: sizes[0] },
                { compressed: { value: false }, size: sizes[1] },
            ],
        });
        const followed = follow(call);
        const messages = await readAll(followed);
        checkStatus(await followed.status, grpc.status.OK, undefined, 'StreamingOutputCall');
        checkEqual(messages.length, 2, 'answers');
        messages.forEach((m, i) => checkPayload(m.payload, sizes[i], `answer ${i}`));
        const stream = tap.streams[tap.streams.length - 1];
        const flags = stream.received.map((m) => m.flag);
        checkEqual(flags.length, 2, 'messages on the wire');
        checkEqual(flags[0], 1, 'compressed flag of the first answer (compressed: true)');
        checkEqual(stream.response['grpc-encoding'], 'gzip', 'grpc-encoding');
        checkEqual(flags[1], 0, 'compressed flag of the second answer (compressed: false)');
        return `answer flags ${flags.join(' ')}`;
    },

    async ping_pong() {
        await pingPong(newClient());
        return 'four answers of 31415, 9, 2653, 58979 bytes';
    },

    async empty_stream() {
        const call = newClient().FullDuplexCall();
        const followed = follow(call);
        call.end();
        const messages = await readAll(followed);
        checkStatus(await followed.status, grpc.status.OK, undefined, 'FullDuplexCall');
        checkEqual(messages.length, 0, 'answers');
        return 'no answer, status OK';
    },

    async custom_metadata() {
        const initial = 'test_initial_metadata_value';
        const trailing = Buffer.from([0xab, 0xab, 0xab]);
        const metadata = () => {
            const md = new grpc.Metadata();
            md.add('x-grpc-test-echo-initial', initial);
            md.add('x-grpc-test-echo-trailing-bin', trailing);
            return md;
        };
        const client = newClient();
        const checkEchoes = (headers, trailers, stream, what) => {
            check(headers, `${what}: no response headers`);
            checkEqual(
                headers.get('x-grpc-test-echo-initial')[0],
                initial,
                `${what}: initial metadata`,
            );
            checkEqual(
                headers.get('x-grpc-test-echo-trailing-bin').length,
                0,
                `${what}: trailing-bin in the headers`,
            );
            const echoed = trailers.get('x-grpc-test-echo-trailing-bin');
            checkEqual(
                echoed.length,
                1,
                `${what}: x-grpc-test-echo-trailing-bin values in the trailers`,
            );
            check(
                Buffer.isBuffer(echoed[0]) && echoed[0].equals(trailing),
                `${what}: x-grpc-test-echo-trailing-bin ${show(echoed[0])}, want ${show(trailing)}`,
            );
            // On the wire: the first in the response headers, the second in
            // the trailers only.
            checkEqual(
                stream.response['x-grpc-test-echo-initial'],
                initial,
                `${what}: response header on the wire`,
            );
            checkEqual(
                stream.trailers['x-grpc-test-echo-trailing-bin'],
                'q6ur',
                `${what}: trailer on the wire`,
            );
            check(
                !('x-grpc-test-echo-initial' in stream.trailers),
                `${what}: initial metadata in the trailers`,
            );
        };

        const { response, status, headers } = await unary(client, 'UnaryCall', LARGE_REQUEST, {
            metadata: metadata(),
        });
        checkStatus(status, grpc.status.OK, undefined, 'UnaryCall');
        checkPayload(response.payload, 314159, 'UnaryCall');
        checkEchoes(headers, status.metadata, tap.streams[tap.streams.length - 1], 'UnaryCall');

        const call = client.FullDuplexCall(metadata());
        const followed = follow(call);
        call.write({ response_parameters: [{ size: 314159 }], payload: { body: zeros(271828) } });
        call.end();
        const messages = await readAll(followed);
        const duplexStatus = await followed.status;
        checkStatus(duplexStatus, grpc.status.OK, undefined, 'FullDuplexCall');
        checkEqual(messages.length, 1, 'FullDuplexCall: answers');
        checkPayload(messages[0].payload, 314159, 'FullDuplexCall');
        checkEchoes(
            followed.headers(),
            duplexStatus.metadata,
            tap.streams[tap.streams.length - 1],
            'FullDuplexCall',
        );
        return 'both echoes on UnaryCall and FullDuplexCall';
    },

    async status_code_and_message() {
        const client = newClient();
        const message = 'test status message';
        const echo = { code: 2, message };
        const { response, status } = await unary(client, 'UnaryCall', { response_status: echo });
        checkStatus(status, grpc.status.UNKNOWN, message, 'UnaryCall');
        checkEqual(response, null, 'UnaryCall: answer');

        const call = client.FullDuplexCall();
        const followed = follow(call);
        call.write({ response_status: echo });
        call.end();
        const messages = await readAll(followed);
        checkStatus(await followed.status, grpc.status.UNKNOWN, message, 'FullDuplexCall');
        checkEqual(messages.length, 0, 'FullDuplexCall: answers');
        return `UNKNOWN "${message}" on UnaryCall and FullDuplexCall`;
    },

    async special_status_message() {
        const message =
            '\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \u{1f608}\t\n';
        const { status } = await unary(newClient(), 'UnaryCall', {
            response_status: { code: 2, message },
        });
        checkStatus(status, grpc.status.UNKNOWN, message, 'UnaryCall');
        // grpc-message is percent-encoded on the wire (printable ASCII
        // other than '%' as itself).
        const stream = tap.streams[tap.streams.length - 1];
        const wire = (stream.trailers || stream.response)['grpc-message'];
        check(
            /^[\x20-\x7e]*$/.test(wire),
            `grpc-message on the wire is not printable ASCII: ${show(wire)}`,
        );
        return 'UNKNOWN with the message intact';
    },

    async unimplemented_method() {
        const { status } = await unary(newClient(), 'UnimplementedCall', {});
        checkStatus(status, grpc.status.UNIMPLEMENTED, undefined, 'TestService/UnimplementedCall');
        return 'UNIMPLEMENTED';
    },

    async unimplemented_service() {
        const { status } = await unary(
            newClient({ service: 'UnimplementedService' }),
            'UnimplementedCall',
            {},
        );
        checkStatus(
            status,
            grpc.status.UNIMPLEMENTED,
            undefined,
            'UnimplementedService/UnimplementedCall',
        );
        return 'UNIMPLEMENTED';
    },

    async cancel_after_begin() {
        const client = newClient();
        // grpc-js opens the HTTP/2 stream a little after the call starts,
        // and a call cancelled before that never reaches the server: the
        // call is cancelled once its HEADERS are out and the server has had
        // a moment to start it.
        const opened = new Promise((resolve) => {
            tap.onStream = (entry) => {
                tap.onStream = null;
                // Node may have sent the HEADERS within request().
                if (entry.stream.pending) {
                    entry.stream.once('ready', () => resolve(entry));
                } else {
                    resolve(entry);
                }
            };
        });
        let started;
        const ended = clientStreaming(client, 'StreamingInputCall', (call) => {
            started = call;
        });
        const entry = await opened;
        await sleep(50);
        started.cancel();
        const { response, status } = await ended;
        checkStatus(status, grpc.status.CANCELLED, undefined, 'StreamingInputCall');
        checkEqual(response, null, 'answer');
        await stillServing(client, 'cancel_after_begin');
        checkEqual(entry.sent.length, 0, 'messages sent');
        checkEqual(
            entry.reset,
            http2.constants.NGHTTP2_CANCEL,
            'RST_STREAM code the call closed with',
        );
        return 'CANCELLED after the HEADERS (RST_STREAM CANCEL), and the channel still serves';
    },

    async cancel_after_first_response() {
        const client = newClient();
        const call = client.FullDuplexCall();
        const followed = follow(call);
        call.write({ response_parameters: [{ size: 31415 }], payload: { body: zeros(27182) } });
        const first = await followed.next();
        check(first !== null, 'the call ended before its first answer');
        checkPayload(first.payload, 31415, 'the first answer');
        call.cancel();
        checkStatus(await followed.status, grpc.status.CANCELLED, undefined, 'FullDuplexCall');
        await stillServing(client, 'cancel_after_first_response');
        const stream = tap.streams[0];
        checkEqual(
            stream.reset,
            http2.constants.NGHTTP2_CANCEL,
            'RST_STREAM code the call closed with',
        );
        return 'CANCELLED after the first answer (RST_STREAM CANCEL), and the channel still serves';
    },

    async timeout_on_sleeping_server() {
        // As described: 1 ms, which grpc-js may spend before the stream is
        // even open; that part checks the client alone.
        const client = newClient();
        const call = client.FullDuplexCall({ deadline: Date.now() + 1 });
        const followed = follow(call);
        call.write({ payload: { body: zeros(27182) } });
        const messages = await readAll(followed);
        checkStatus(
            await followed.status,
            grpc.status.DEADLINE_EXCEEDED,
            undefined,
            'FullDuplexCall',
        );
        checkEqual(messages.length, 0, 'answers');

        // The server's own deadline: grpc-js ends a call at its deadline
        // whatever the server does, so this call has 5 s while the tap
        // tells the server 200 ms (grpc-timeout); asked for an answer 2 s
        // away, the server must end the call itself, with DEADLINE_EXCEEDED.
        // (grpc-js opens the stream a little later, so the rewrite stays
        // until then; it is for this stream alone.)
        tap.rewrite = (headers) => {
            tap.rewrite = null;
            return { ...headers, 'grpc-timeout': '200m' };
        };
        const started = Date.now();
        const slow = client.FullDuplexCall({ deadline: Date.now() + 5000 });
        const slowFollowed = follow(slow);
        slow.write({ response_parameters: [{ size: 1, interval_us: 2000000 }] });
        const slowMessages = await readAll(slowFollowed);
        const slowStatus = await slowFollowed.status;
        const took = Date.now() - started;
        checkStatus(
            slowStatus,
            grpc.status.DEADLINE_EXCEEDED,
            undefined,
            'the call with grpc-timeout 200m',
        );
        checkEqual(slowMessages.length, 0, 'answers of the call with grpc-timeout 200m');
        check(took >= 150 && took < 1500, `the call with grpc-timeout 200m ended after ${took} ms`);
        const stream = tap.streams[tap.streams.length - 1];
        checkEqual(stream.request['grpc-timeout'], '200m', 'grpc-timeout sent');
        const ending = stream.trailers || stream.response || {};
        checkEqual(ending['grpc-status'], '4', "the server's grpc-status");
        await stillServing(client, 'timeout_on_sleeping_server');
        return (
            `DEADLINE_EXCEEDED at 1 ms (the client's), and from the server for grpc-timeout 200m ` +
            `(after ${took} ms); the channel still serves`
        );
    },

    /**
     * Ours: 100 FullDuplexCall ping-pongs and 100 large_unary calls at once
     * on one channel, all of which must succeed with every answer checked,
     * on one connection, with at least 150 of them open at the same time.
     */
    async concurrent_calls() {
        const client = newClient();
        await stillServing(client, 'before the calls');
        const calls = [];
        for (let i = 0; i < 100; i++) {
            calls.push(pingPong(client, `ping_pong #${i}`));
            calls.push(largeUnary(client, `large_unary #${i}`));
        }
        const results = await Promise.allSettled(calls);
        const failed = results.filter((r) => r.status === 'rejected');
        check(
            failed.length === 0,
            `${failed.length} of ${calls.length} calls failed; the first: ${failed[0] && failed[0].reason.message}`,
        );
        checkEqual(tap.sessions, 1, 'connections opened');
        checkEqual(tap.streams.length, 201, 'streams opened');
        check(tap.mostOpen >= 150, `at most ${tap.mostOpen} calls were open at once`);
        return `200 calls (100 ping_pong, 100 large_unary) on one connection, ${tap.mostOpen} at once at most`;
    },

    /**
     * Ours: a server stream of about 5 MiB read slowly: the client stops
     * reading four times for 250 ms, and every answer is checked in order
     * once it resumes. Node's http2 gives the window back only as the
     * client reads, so a pause shuts the stream's window and the server
     * must wait for the WINDOW_UPDATEs that follow: at least two pauses
     * must end with the window at 0.
     */
    async slow_reader() {
        // 80 answers of 16 KiB .. 96 KiB, each a different size so that
        // order shows, and one of 1 MiB in the middle.
        const sizes = [];
        for (let i = 0; i < 80; i++) {
            sizes.push(16384 + i * 1031);
        }
        sizes.splice(40, 0, 1 << 20);
        const total = sizes.reduce((a, b) => a + b, 0);
        const call = newClient().StreamingOutputCall({
            response_parameters: sizes.map((size) => ({ size })),
        });
        let index = 0;
        let pauses = 0;
        // Pauses at whose end the stream's window was shut.
        let shut = 0;
        let problem = null;
        const ended = new Promise((resolve) => {
            call.on('data', (message) => {
                if (problem) {
                    return;
                }
                try {
                    check(
                        index < sizes.length,
                        `an answer more than the ${sizes.length} asked for`,
                    );
                    checkPayload(message.payload, sizes[index], `answer ${index}`);
                } catch (e) {
                    problem = e;
                    call.cancel();
                    return;
                }
                index += 1;
                if (index % 20 === 5) {
                    pauses += 1;
                    call.pause();
                    setTimeout(() => {
                        // What the server may still send on the stream,
                        // at the end of the pause (none once it is closed).
                        const window = tap.streams[0].stream.state.localWindowSize;
                        if (window === 0) {
                            shut += 1;
                        }
                        call.resume();
                    }, 250);
                }
            });
            call.on('error', () => {});
            // The status comes as soon as the trailers do, while up to a
            // stream buffer of answers may still wait to be read; the
            // stream ends once they have been.
            call.on('end', resolve);
        });
        const status = await new Promise((resolve) => call.on('status', resolve));
        await ended;
        if (problem) {
            throw problem;
        }
        checkStatus(status, grpc.status.OK, undefined, 'StreamingOutputCall');
        checkEqual(index, sizes.length, 'answers read');
        const wire = tap.streams[0].received;
        checkEqual(wire.length, sizes.length, 'messages on the wire');
        wire.forEach((m, i) => {
            checkEqual(m.flag, 0, `compressed flag of answer ${i}`);
        });
        // The server filled the window and waited for it to open again.
        check(
            shut >= 2,
            `the stream's window was shut at the end of ${shut} of ${pauses} pauses, not 2 or more`,
        );
        return (
            `${sizes.length} answers, ${(total / 1048576).toFixed(1)} MiB, read with ${pauses} pauses ` +
            `of 250 ms (window shut at the end of ${shut})`
        );
    },
};

// ----- main -----

async function main() {
    const args = parseArgs(process.argv.slice(2));
    if (args.list) {
        console.log(Object.keys(CASES).join('\n'));
        return 0;
    }
    for (const required of ['server_host', 'server_port', 'proto_dir', 'test_case']) {
        if (!args[required]) {
            throw new Error(`--${required} is required`);
        }
    }
    const run = CASES[args.test_case];
    if (!run) {
        throw new Error(`unknown test case ${JSON.stringify(args.test_case)}`);
    }
    services = loadServices(path.resolve(args.proto_dir));
    target = `${args.server_host}:${args.server_port}`;
    const started = Date.now();
    // Node exits when nothing is left to wait for, also while a case waits
    // for an event that will never come: that is a failure too.
    let finished = false;
    process.on('exit', () => {
        if (!finished) {
            console.log(`${args.test_case}: FAILED: stopped waiting for an event that never came`);
            process.exitCode = 1;
        }
    });
    try {
        const saw = await run();
        finished = true;
        const took = Date.now() - started;
        console.log(`${args.test_case}: ok: ${saw} (${took} ms)`);
        return 0;
    } catch (e) {
        finished = true;
        if (e instanceof CheckFailed) {
            console.log(`${args.test_case}: FAILED: ${e.message}`);
        } else {
            console.log(`${args.test_case}: FAILED: ${e.stack || e}`);
        }
        return 1;
    }
}

main().then(
    (code) => process.exit(code),
    (e) => {
        console.error(`interop_client: ${e.message}`);
        process.exit(2);
    },
);
