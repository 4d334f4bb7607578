"""A hostile or plain TLS server on 127.0.0.1 for syncpeer's tests (TestKit's TLSTestServer).

    tls_server.py CERT KEY pool FILE    HTTP/1.1: every request is answered 200 with FILE's bytes
    tls_server.py CERT KEY relay LIE    Syncthing's relay protocol (v1, protocol mode): the first
                                        message is answered with the LIE:
        garbage      bytes that are not a relay message
        huge         a header announcing a 1 GiB message
        silence      nothing (the connection stays open)
        full         RelayFull
        other        a session invitation from another device (random ID)
        ok           Response 0 (a join that works), then silence
        racy         strelaysrv's race: a connect request gets a real invitation to a session
                     on this server's plain session port, whose first join is refused with
                     "2 already connected" (the relay not ready yet) and later ones succeed

Prints "port N" once it listens; serves until killed. Local only: binds 127.0.0.1.
"""
import os
import socket
import ssl
import struct
import sys
import threading
import time

MAGIC = 0x9E79BC40


def message(kind, body=b""):
    return struct.pack(">III", MAGIC, kind, len(body)) + body


def opaque(data):
    return struct.pack(">I", len(data)) + data + b"\0" * ((4 - len(data) % 4) % 4)


def read_exactly(conn, count):
    data = b""
    while len(data) < count:
        more = conn.recv(count - len(data))
        if not more:
            return None
        data += more
    return data


def serve_pool(conn, body):
    request = b""
    while b"\r\n\r\n" not in request and len(request) < 65536:
        more = conn.recv(4096)
        if not more:
            return
        request += more
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    conn.sendall(head + body)


def serve_relay(conn, lie):
    header = read_exactly(conn, 12)
    if header is None:
        return
    _, _, length = struct.unpack(">III", header)
    body = read_exactly(conn, length) if length <= 1024 else None
    if body is None:
        return
    if lie == "garbage":
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    elif lie == "huge":
        conn.sendall(struct.pack(">III", MAGIC, 4, 1 << 30))
    elif lie == "full":
        conn.sendall(message(7))
    elif lie == "other":
        body = opaque(os.urandom(32)) + opaque(os.urandom(32)) + opaque(b"") + struct.pack(">II", 22067, 0)
        conn.sendall(message(6, body))
    elif lie == "ok":
        conn.sendall(message(4, struct.pack(">i", 0) + opaque(b"success")))
    elif lie == "racy":
        requested = body[4:36]
        invitation = opaque(requested) + opaque(os.urandom(32)) + opaque(b"") + struct.pack(">II", SESSION["port"], 0)
        conn.sendall(message(6, invitation))
        return
    time.sleep(60)


SESSION = {"port": 0, "joins": 0, "lock": threading.Lock()}


def serve_sessions(listener):
    """Plain session mode: the first JoinSessionRequest is refused as strelaysrv's race refuses it."""
    while True:
        raw, _ = listener.accept()
        header = read_exactly(raw, 12)
        if header is None or read_exactly(raw, struct.unpack(">III", header)[2]) is None:
            raw.close()
            continue
        with SESSION["lock"]:
            SESSION["joins"] += 1
            first = SESSION["joins"] == 1
        if first:
            raw.sendall(message(4, struct.pack(">i", 2) + opaque(b"already connected")))
            raw.close()
        else:
            raw.sendall(message(4, struct.pack(">i", 0) + opaque(b"success")))
            threading.Thread(target=lambda: (time.sleep(60), raw.close()), daemon=True).start()


def main():
    cert, key, mode, argument = sys.argv[1:5]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if mode == "relay":
        context.set_alpn_protocols(["bep-relay"])
    body = open(argument, "rb").read() if mode == "pool" else b""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    if mode == "relay" and argument == "racy":
        sessions = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sessions.bind(("127.0.0.1", 0))
        sessions.listen(16)
        SESSION["port"] = sessions.getsockname()[1]
        threading.Thread(target=serve_sessions, args=(sessions,), daemon=True).start()
    print("port", listener.getsockname()[1], flush=True)

    def handle(raw):
        try:
            with context.wrap_socket(raw, server_side=True) as conn:
                if mode == "pool":
                    serve_pool(conn, body)
                else:
                    serve_relay(conn, argument)
        except (OSError, ssl.SSLError):
            pass

    while True:
        raw, _ = listener.accept()
        threading.Thread(target=handle, args=(raw,), daemon=True).start()


if __name__ == "__main__":
    main()
