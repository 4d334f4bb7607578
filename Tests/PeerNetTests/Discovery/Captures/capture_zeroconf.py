#!/usr/bin/python3
"""Captures the mDNS responses of a python-zeroconf responder, for the codec tests.

Run ONLY inside a throw-away network namespace whose lo is up with multicast on and
224.0.0.0/4 routed to it, e.g. (as root):

  ip netns add cap && ip -n cap link set lo up && ip -n cap link set lo multicast on \
    && ip -n cap route add 224.0.0.0/4 dev lo \
    && ip netns exec cap /usr/bin/python3 capture_zeroconf.py > zeroconf-0.47.3.txt; ip netns del cap

It registers "ZC Peer._syncpeer._tcp.local." (host zc-peer.local., 127.0.0.1, port 47001,
TXT id=ZC-ID v=1), asks the questions a syncpeer browser and prober ask (PTR, SRV, A, ANY)
and prints each response received as `QUESTION-TYPE HEX` (one line each; the type is that of
the last question asked before it arrived: answers to SRV come late, bundled with others).
"""
import socket
import struct
import time

import zeroconf
from zeroconf import IPVersion, ServiceInfo, Zeroconf


def question(name, qtype):
    out = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".") if label)
    return out + b"\0" + struct.pack(">HH", qtype, 1)


def main():
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    service_type = "_syncpeer._tcp.local."
    info = ServiceInfo(service_type, "ZC Peer." + service_type, addresses=[socket.inet_aton("127.0.0.1")],
                       port=47001, properties={"id": "ZC-ID", "v": "1"}, server="zc-peer.local.")
    zc.register_service(info)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", 5353))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton("224.0.0.251") + socket.inet_aton("127.0.0.1"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    s.settimeout(0.1)
    print("# python-zeroconf %s responses (QR=1 only)" % zeroconf.__version__)
    for name, qtype, label in [("_syncpeer._tcp.local", 12, "PTR"), ("ZC Peer._syncpeer._tcp.local", 33, "SRV"),
                               ("zc-peer.local", 1, "A"), ("ZC Peer._syncpeer._tcp.local", 255, "ANY")]:
        s.sendto(struct.pack(">HHHHHH", 0, 0, 1, 0, 0, 0) + question(name, qtype), ("224.0.0.251", 5353))
        end = time.time() + 1.0
        while time.time() < end:
            try:
                data, _ = s.recvfrom(9000)
            except socket.timeout:
                continue
            if data[2] & 0x80:
                print(label, data.hex(), flush=True)
    zc.close()


if __name__ == "__main__":
    main()
