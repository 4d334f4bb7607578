#!/usr/bin/python3
"""An independent mDNS/DNS-SD peer for the interop tests: python-zeroconf, either Debian's
(/usr/bin/python3, python3-zeroconf) or the current PyPI release (a venv's python).

Always run inside a test network namespace: `ip netns exec NS PYTHON zeroconf_peer.py ...`.
ZC_PEER_DEBUG=1 in the environment logs python-zeroconf at DEBUG level to stderr.

  version                                      prints {"version": ...}
  browse   TYPE IFACE_IP SECONDS               prints one JSON line per service seen (IFACE_IP
                                               "v6": every interface, over IPv6 only)
  register TYPE NAME PORT IFACE_IP SECONDS [key=value ...]      (IFACE_IP "v6:ADDRESS": IPv6 only)
                                               registers (renaming on a conflict), prints
                                               {"registered": name}, waits SECONDS or until
                                               SIGUSR1 (the test saw what it needed), unregisters;
                                               {"conflict": name} when the name is taken
                                               and no rename is possible
"""
import json
import signal
import socket
import sys
import threading
import time

import zeroconf
from zeroconf import InterfaceChoice, IPVersion, NonUniqueNameException, ServiceBrowser, ServiceStateChange, Zeroconf
from zeroconf import ServiceInfo


def emit(obj):
    print(json.dumps(obj), flush=True)


def decode_properties(props):
    out = {}
    for k, v in (props or {}).items():
        key = k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)
        out[key] = "" if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
    return out


def zeroconf_on(iface_ip):
    """A Zeroconf on the interface with IPv4 address IFACE_IP, or, given "v6" or
    "v6:ADDRESS", on every IPv6 interface of the namespace over IPv6 only."""
    if iface_ip.startswith("v6"):
        return Zeroconf(interfaces=InterfaceChoice.All, ip_version=IPVersion.V6Only)
    return Zeroconf(interfaces=[iface_ip], ip_version=IPVersion.V4Only)


def browse(service_type, iface_ip, seconds):
    zc = zeroconf_on(iface_ip)
    full_type = "_%s._tcp.local." % service_type

    def on_change(zeroconf, service_type, name, state_change):
        if state_change in (ServiceStateChange.Added, ServiceStateChange.Updated):
            info = zeroconf.get_service_info(service_type, name, timeout=3000)
            if info is None:
                emit({"event": "unresolved", "name": name})
                return
            emit({
                "event": "added" if state_change == ServiceStateChange.Added else "updated",
                "name": name,
                "port": info.port,
                "server": info.server,
                "addresses": [socket.inet_ntoa(a) for a in info.addresses if len(a) == 4],
                "addresses6": [socket.inet_ntop(socket.AF_INET6, a) for a in info.addresses_by_version(IPVersion.V6Only)],
                "properties": decode_properties(info.properties),
            })
        else:
            emit({"event": "removed", "name": name})

    ServiceBrowser(zc, full_type, handlers=[on_change])
    emit({"event": "ready"})  # the test's clocks start here, not at a slow start-up
    time.sleep(seconds)
    zc.close()


def register(service_type, name, port, iface_ip, seconds, pairs):
    # Under a whole-suite run's load the test may need many seconds to start its browser
    # after "registered"; a fixed short stay ended the registration before it looked.
    done = threading.Event()
    signal.signal(signal.SIGUSR1, lambda signum, frame: done.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # the test runner's mask is inherited
    zc = zeroconf_on(iface_ip)
    emit({"event": "ready"})
    full_type = "_%s._tcp.local." % service_type
    if iface_ip.startswith("v6:"):
        address = socket.inet_pton(socket.AF_INET6, iface_ip[3:])
    else:
        address = socket.inet_aton(iface_ip)
    props = {}
    for pair in pairs:
        k, _, v = pair.partition("=")
        props[k] = v
    info = ServiceInfo(full_type, "%s.%s" % (name, full_type), addresses=[address],
                       port=port, properties=props, server="zc-peer.local.")
    try:
        zc.register_service(info, allow_name_change=True)
    except NonUniqueNameException:
        emit({"conflict": info.name})
        zc.close()
        return
    emit({"registered": info.name})
    done.wait(seconds)
    zc.unregister_service(info)
    emit({"unregistered": info.name})
    zc.close()


def main():
    import os, logging
    if os.environ.get("ZC_PEER_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(relativeCreated)d %(threadName)s %(message)s")
        logging.getLogger("zeroconf").setLevel(logging.DEBUG)
    mode = sys.argv[1]
    if mode == "version":
        emit({"version": zeroconf.__version__})
    elif mode == "browse":
        browse(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif mode == "register":
        register(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], float(sys.argv[6]), sys.argv[7:])
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
