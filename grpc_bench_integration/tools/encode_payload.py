#!/usr/bin/env python3
"""Encodes a grpc_bench payload (JSON) as a gRPC request body.

Usage: encode_payload.py PROTO MESSAGE PAYLOAD_JSON OUTFILE

The JSON is turned into protobuf text format and encoded by
`protoc --encode=MESSAGE`, which checks it against the schema; the body is
that message behind the 5-byte gRPC prefix (uncompressed flag, big-endian
length), ready for `h2load -d` or `nghttp -d`.

JSON strings that name a value of an enum declared in PROTO are written as
enum identifiers, other strings as quoted strings: enough for grpc_bench's
scenarios. protoc rejects anything that does not fit the schema.
"""

import json
import os
import re
import struct
import subprocess
import sys


def enum_values(proto_text):
    names = set()
    for body in re.findall(r"\benum\s+\w+\s*\{([^}]*)\}", proto_text):
        names.update(re.findall(r"\b([A-Za-z_]\w*)\s*=\s*-?\d+", body))
    return names


def quote(s):
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in "\\\"":
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def to_text(value, enums, indent=""):
    """Text format of the fields of a JSON object."""
    lines = []
    for key, v in value.items():
        items = v if isinstance(v, list) else [v]
        for item in items:
            if isinstance(item, dict):
                lines.append(f"{indent}{key} {{")
                lines.extend(to_text(item, enums, indent + "  "))
                lines.append(f"{indent}}}")
            elif isinstance(item, bool):
                lines.append(f"{indent}{key}: {'true' if item else 'false'}")
            elif isinstance(item, (int, float)):
                lines.append(f"{indent}{key}: {item!r}")
            elif isinstance(item, str) and item in enums:
                lines.append(f"{indent}{key}: {item}")
            elif isinstance(item, str):
                lines.append(f"{indent}{key}: {quote(item)}")
            elif item is not None:
                raise SystemExit(f"cannot encode {key}={item!r}")
    return lines


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    proto, message, payload, out = sys.argv[1:]
    with open(proto) as f:
        enums = enum_values(f.read())
    with open(payload) as f:
        text = "\n".join(to_text(json.load(f), enums)) + "\n"
    encoded = subprocess.run(
        [
            "protoc",
            f"--proto_path={os.path.dirname(os.path.abspath(proto))}",
            f"--encode={message}",
            os.path.basename(proto),
        ],
        input=text.encode(),
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    with open(out, "wb") as f:
        f.write(struct.pack(">BI", 0, len(encoded)) + encoded)


if __name__ == "__main__":
    main()
