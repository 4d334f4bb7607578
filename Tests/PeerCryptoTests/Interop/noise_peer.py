#!/usr/bin/env python3
"""Noise XX peer (Noise_XX_25519_AESGCM_SHA256, protocol versions 2 to 4, or
Noise_XX_25519_ChaChaPoly_BLAKE2b, version 1) built on the PyPI package `noiseprotocol`.

Test helper only: PeerCryptoTests runs it to check the Swift Noise implementation against
an independent one. Everything is hex-encoded JSON; nothing touches the network.

Modes (first argument):

  transcript  Reads one JSON object on stdin:
                {"protocol"?, "prologue", "initiator": {"static", "ephemeral"},
                 "responder": {"static", "ephemeral"},
                 "handshake_payloads": [3 payloads],
                 "transport": [{"from": "initiator"|"responder", "payload"}]}
              (private keys as hex) and runs both parties in-process. Prints
                {"handshake_messages", "transport_messages", "handshake_hash",
                 "initiator_remote_static", "responder_remote_static"}.

  live        A responder driven one JSON line at a time, so the Swift side can act
              as a real initiator. Requests and replies:
                {"op": "start", "protocol"?, "prologue", "static"?} -> {"public_key"}
                {"op": "read", "data"}     -> {"payload"}        (handshake message)
                {"op": "write", "payload"} -> {"data"}
                {"op": "encrypt", "payload"} -> {"data"}         (transport)
                {"op": "decrypt", "data"}  -> {"payload"}
                {"op": "info"}             -> {"handshake_hash", "remote_static", "finished"}
              Any failure replies {"error": "..."}; end of input ends the process.
"""
import json
import sys
import warnings

from noise.connection import Keypair, NoiseConnection

PROTOCOLS = {b"Noise_XX_25519_AESGCM_SHA256", b"Noise_XX_25519_ChaChaPoly_BLAKE2b"}
DEFAULT_PROTOCOL = "Noise_XX_25519_AESGCM_SHA256"

# noiseprotocol warns when an ephemeral key is set explicitly; transcript mode does that
# on purpose (fixed keys make the transcript comparable byte for byte).
warnings.simplefilter("ignore")


def unhex(text):
    return bytes.fromhex(text or "")


def protocol_name(request):
    name = (request.get("protocol") or DEFAULT_PROTOCOL).encode()
    if name not in PROTOCOLS:
        raise ValueError("unexpected protocol %r" % name)
    return name


def make_party(name, initiator, prologue, static=None, ephemeral=None):
    conn = NoiseConnection.from_name(name)
    if initiator:
        conn.set_as_initiator()
    else:
        conn.set_as_responder()
    conn.set_prologue(prologue)
    if static is not None:
        conn.set_keypair_from_private_bytes(Keypair.STATIC, static)
    else:
        from cryptography.hazmat.primitives.asymmetric import x25519
        from cryptography.hazmat.primitives import serialization

        key = x25519.X25519PrivateKey.generate()
        raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
        conn.set_keypair_from_private_bytes(Keypair.STATIC, raw)
    if ephemeral is not None:
        conn.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral)
    conn.start_handshake()
    return conn


def public_static(conn):
    return conn.noise_protocol.keypairs["s"].public_bytes


def read_handshake(conn, learned, data):
    """read_message that remembers the peer's static key: noiseprotocol drops its
    handshake state (and with it `rs`) as soon as the last message is processed."""
    state = conn.noise_protocol.handshake_state
    payload = bytes(conn.read_message(data))
    rs = getattr(state, "rs", None)
    if rs is not None and hasattr(rs, "public_bytes"):
        learned["rs"] = rs.public_bytes.hex()
    return payload


def transcript(request):
    prologue = unhex(request["prologue"])
    name = protocol_name(request)
    ini = make_party(name, True, prologue, unhex(request["initiator"]["static"]), unhex(request["initiator"]["ephemeral"]))
    res = make_party(name, False, prologue, unhex(request["responder"]["static"]), unhex(request["responder"]["ephemeral"]))

    learned = {id(ini): {}, id(res): {}}
    handshake = []
    payloads = [unhex(p) for p in request["handshake_payloads"]]
    if len(payloads) != 3:
        raise ValueError("XX has 3 handshake messages, got %d payloads" % len(payloads))
    for i, payload in enumerate(payloads):
        writer, reader = (ini, res) if i % 2 == 0 else (res, ini)
        message = bytes(writer.write_message(payload))
        received = read_handshake(reader, learned[id(reader)], message)
        if received != payload:
            raise ValueError("handshake payload %d did not round-trip" % i)
        handshake.append(message.hex())
    if not (ini.handshake_finished and res.handshake_finished):
        raise ValueError("handshake did not finish after 3 messages")
    if ini.get_handshake_hash() != res.get_handshake_hash():
        raise ValueError("the two parties disagree on the handshake hash")

    transport = []
    for item in request["transport"]:
        sender, receiver = (ini, res) if item["from"] == "initiator" else (res, ini)
        payload = unhex(item["payload"])
        ciphertext = sender.encrypt(payload)
        if receiver.decrypt(ciphertext) != payload:
            raise ValueError("transport payload did not round-trip")
        transport.append(ciphertext.hex())

    return {
        "handshake_messages": handshake,
        "transport_messages": transport,
        "handshake_hash": ini.get_handshake_hash().hex(),
        "initiator_remote_static": learned[id(ini)].get("rs"),
        "responder_remote_static": learned[id(res)].get("rs"),
    }


def live():
    conn = None
    learned = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "start":
                static = unhex(request["static"]) if request.get("static") else None
                conn = make_party(protocol_name(request), False, unhex(request["prologue"]), static)
                reply = {"public_key": public_static(conn).hex()}
            elif conn is None:
                raise ValueError("send a 'start' request first")
            elif op == "read":
                reply = {"payload": read_handshake(conn, learned, unhex(request["data"])).hex()}
            elif op == "write":
                reply = {"data": bytes(conn.write_message(unhex(request["payload"]))).hex()}
            elif op == "encrypt":
                reply = {"data": conn.encrypt(unhex(request["payload"])).hex()}
            elif op == "decrypt":
                reply = {"payload": conn.decrypt(unhex(request["data"])).hex()}
            elif op == "info":
                finished = conn.handshake_finished
                reply = {
                    "finished": finished,
                    "handshake_hash": conn.get_handshake_hash().hex() if finished else None,
                    "remote_static": learned.get("rs"),
                }
            else:
                raise ValueError("unknown op %r" % op)
        except Exception as error:  # reported to the Swift side, which fails the test
            reply = {"error": "%s: %s" % (type(error).__name__, error)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "transcript"
    if mode == "transcript":
        json.dump(transcript(json.load(sys.stdin)), sys.stdout)
        sys.stdout.write("\n")
    elif mode == "live":
        live()
    else:
        sys.exit("usage: noise_peer.py [transcript|live]")


if __name__ == "__main__":
    main()
