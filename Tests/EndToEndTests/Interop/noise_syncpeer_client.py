#!/usr/bin/env python3
"""An independent syncpeer initiator built on the PyPI `noise` package (noiseprotocol).

Usage: noise_syncpeer_client.py PORT [NAME]

Connects to 127.0.0.1:PORT (loopback only), runs Noise_XX_25519_AESGCM_SHA256 as the
initiator with the prologue "syncpeer/4" (protocol version 4: message 1 carries the version,
u16 big-endian, in the clear), decodes the responder's hello (message 2), sends
its own hello (message 3, display name NAME, default "python-peer", no listen port), then
reads and decrypts the first transport message, which must be the frame
pairing(pending) = 10 00000001 01. Prints one JSON object on stdout and exits 0 when every
check passed, 1 otherwise (the JSON then says why).
"""
import hashlib
import json
import os
import socket
import struct
import sys

from noise.connection import Keypair, NoiseConnection

PROTOCOL = b"Noise_XX_25519_AESGCM_SHA256"
PROLOGUE = b"syncpeer/4"
VERSION = 4
HELLO_MAGIC = b"SPH1"
PAIRING_PENDING = bytes([0x10, 0x00, 0x00, 0x00, 0x01, 0x01])


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError(f"connection ended after {len(data)} of {count} bytes")
        data += chunk
    return data


def read_message(sock):
    (length,) = struct.unpack(">H", read_exactly(sock, 2))
    return read_exactly(sock, length)


def write_message(sock, message):
    sock.sendall(struct.pack(">H", len(message)) + message)


def encode_hello(name, software="noise-python/0.3", features=("messages",)):
    out = bytearray(HELLO_MAGIC)
    out += struct.pack(">H", VERSION)  # protocol version
    for text in (name, software):
        raw = text.encode()
        out += bytes([len(raw)]) + raw
    out += bytes([len(features)])
    for feature in features:
        raw = feature.encode()
        out += bytes([len(raw)]) + raw
    out += bytes([0])  # no invitation context
    out += bytes([0])  # no listen port
    return bytes(out)


def decode_hello(data):
    """Decodes an SPH1 hello; raises ValueError on anything malformed."""
    pos = 0

    def take(count):
        nonlocal pos
        if pos + count > len(data):
            raise ValueError("hello is truncated")
        piece = data[pos:pos + count]
        pos += count
        return piece

    magic = take(4)
    if magic != HELLO_MAGIC:
        raise ValueError(f"bad hello magic {magic!r}")
    (version,) = struct.unpack(">H", take(2))
    name = take(take(1)[0]).decode()
    software = take(take(1)[0]).decode()
    features = [take(take(1)[0]).decode() for _ in range(take(1)[0])]
    context = None
    if take(1)[0] == 1:
        (length,) = struct.unpack(">H", take(2))
        context = take(length).decode()
    listen_port = None
    if take(1)[0] == 1:
        (listen_port,) = struct.unpack(">H", take(2))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes after the hello")
    return {"magic": magic.decode(), "version": version, "name": name, "software": software,
            "features": features, "context": context, "listenPort": listen_port}


def short_authentication_string(handshake_hash):
    digest = hashlib.blake2b(b"syncpeer-sas" + handshake_hash, digest_size=32).digest()
    return "%06d" % (struct.unpack(">I", digest[:4])[0] % 1_000_000)


def main():
    port = int(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 else "python-peer"
    summary = {"ok": False}
    try:
        noise = NoiseConnection.from_name(PROTOCOL)
        noise.set_as_initiator()
        noise.set_keypair_from_private_bytes(Keypair.STATIC, os.urandom(32))
        noise.set_prologue(PROLOGUE)
        noise.start_handshake()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            write_message(sock, noise.write_message(struct.pack(">H", VERSION)))  # 1: -> e
            responder_hello = decode_hello(bytes(noise.read_message(read_message(sock))))  # 2: <- e, ee, s, es
            summary["responder"] = responder_hello
            write_message(sock, noise.write_message(encode_hello(name)))  # 3: -> s, se
            if not noise.handshake_finished:
                raise RuntimeError("the handshake did not finish after three messages")
            handshake_hash = bytes(noise.get_handshake_hash())
            summary["handshakeHash"] = handshake_hash.hex()
            summary["sas"] = short_authentication_string(handshake_hash)
            plaintext = bytes(noise.decrypt(read_message(sock)))
            summary["firstTransportPlaintext"] = plaintext.hex()
            summary["firstFrameIsPairingPending"] = plaintext[:len(PAIRING_PENDING)] == PAIRING_PENDING
        summary["ok"] = summary["firstFrameIsPairingPending"] and responder_hello["magic"] == "SPH1"
    except Exception as error:  # report, do not crash: the Swift test reads the JSON
        summary["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(summary, sort_keys=True))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
