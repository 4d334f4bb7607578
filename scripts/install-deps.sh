#!/usr/bin/env bash
# Installs what building and testing syncpeer needs on Debian, only what is missing.
# Idempotent: a second run does nothing but check. Needs root (or sudo) the first time.
set -euo pipefail

# python3-zeroconf: an independent mDNS implementation for the discovery interop tests (run only
# inside test network namespaces, with /usr/bin/python3); python3-venv: those tests also make a
# venv (.build/zeroconf-pypi) with the current PyPI release of zeroconf.
# chromium: the dashboard's browser tests (headless, driven over the DevTools protocol on a
# pipe, inside test network namespaces only).
# python3-pyfuse3, fuse3: the power-loss file system of the power-loss tests (a FUSE file
# system in Python that undoes what was not made durable; Tests/EndToEndTests/PowerLoss).
# magic-wormhole, python3-magic-wormhole-mailbox-server, magic-wormhole-transit-relay,
# python3-spake2: the Magic Wormhole interop tests (the real `wormhole` client against a local
# mailbox server and transit relay on 127.0.0.1; Tests/EndToEndTests/WormholeInteropTests.swift)
# and the SPAKE2 vector script (Tests/PeerCryptoTests/Vectors/make-spake2-vectors.py); those tests
# also make a venv (.build/wormhole-pypi) with the current PyPI release of magic-wormhole.
# syncthing-discosrv, syncthing-relaysrv: Syncthing's global discovery server (stdiscosrv) and
# relay (strelaysrv), run by the global reach tests on 127.0.0.1 or in test namespaces only
# (the relay with -pools="", so it never registers with the public pool).
# nftables: the routers of the NAT scenario (masquerade, no inbound, a port forward), in test
# namespaces only (Tests/EndToEndTests/NatTopology.swift).
apt_packages=(libsodium-dev libssl-dev libsqlite3-dev pkg-config python3 python3-venv iproute2 python3-zeroconf chromium python3-pyfuse3 fuse3
              magic-wormhole python3-magic-wormhole-mailbox-server magic-wormhole-transit-relay python3-spake2
              syncthing-discosrv syncthing-relaysrv nftables)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "deps: the Swift 6 toolchain is not on PATH (expected /opt/swift/usr/bin)." >&2
  exit 1
fi

# Test helpers (never the product): an independent Noise implementation for cross-checks.
if ! python3 -c 'import noise.connection' >/dev/null 2>&1; then
  echo "deps: installing the PyPI package noiseprotocol (test helper)"
  python3 -m pip install -q noiseprotocol 2>/dev/null \
    || python3 -m pip install -q --break-system-packages noiseprotocol
fi
