#!/usr/bin/python3
"""Writes spake2-wormhole.json: known answers from the reference python-spake2 (Debian
python3-spake2 0.8) and Magic Wormhole's key derivation (HKDF-SHA256, SecretBox), for
Tests/PeerCryptoTests/SPAKE2VectorTests.swift. Run once; the output is committed.

    /usr/bin/python3 Tests/PeerCryptoTests/Vectors/make-spake2-vectors.py > Tests/PeerCryptoTests/Vectors/spake2-wormhole.json
"""
import hashlib, json
from hkdf import Hkdf
from nacl.secret import SecretBox
import spake2
from spake2 import SPAKE2_Symmetric
from spake2.ed25519_group import Ed25519Group as G
from spake2.params import _Params

def fixed(seed):
    return lambda n: hashlib.sha512(seed).digest()[:n]

def HKDF(skm, outlen, CTXinfo=b""):
    return Hkdf(None, skm).expand(CTXinfo, outlen)

def phase_key(key, side, phase):
    return HKDF(key, 32, b"wormhole:phase:" + hashlib.sha256(side.encode()).digest() + hashlib.sha256(phase.encode()).digest())

params = _Params(G)
cases = []
for i, (pw, ids) in enumerate([(b"4-purple-sausages", b"lothar.com/wormhole/text-or-file-xfer"),
                               (b"", b""),
                               (b"7-guitarist-revenge", b"lothar.com/wormhole/text-or-file-xfer"),
                               ("12-\u00e9clair-caf\u00e9".encode(), b"syncpeer")]):
    a = SPAKE2_Symmetric(pw, idSymmetric=ids, entropy_f=fixed(b"a%d" % i))
    b = SPAKE2_Symmetric(pw, idSymmetric=ids, entropy_f=fixed(b"b%d" % i))
    ma, mb = a.start(), b.start()
    ka, kb = a.finish(mb), b.finish(ma)
    assert ka == kb
    key = ka
    box = SecretBox(phase_key(key, "abcdef0123", "version")).encrypt(b'{"app_versions": {}}', b"\x01" * 24)
    cases.append({
        "password": pw.hex(), "idSymmetric": ids.hex(),
        "passwordScalar": G.scalar_to_bytes(a.pw_scalar).hex(),
        "scalarA": G.scalar_to_bytes(a.xy_scalar).hex(), "scalarB": G.scalar_to_bytes(b.xy_scalar).hex(),
        "messageA": ma.hex(), "messageB": mb.hex(), "key": key.hex(),
        "phaseKey": {"side": "abcdef0123", "phase": "version", "key": phase_key(key, "abcdef0123", "version").hex()},
        "verifier": HKDF(key, 32, b"wormhole:verifier").hex(),
        "transitKey": HKDF(key, 32, b"lothar.com/wormhole/text-or-file-xfer/transit-key").hex(),
        "versionBox": {"nonce": "01" * 24, "plaintext": b'{"app_versions": {}}'.hex(), "box": box.hex()},
    })
# A wrong password gives different keys.
a = SPAKE2_Symmetric(b"4-purple-sausages", idSymmetric=b"x", entropy_f=fixed(b"wa"))
b = SPAKE2_Symmetric(b"4-purple-sausagez", idSymmetric=b"x", entropy_f=fixed(b"wb"))
ma, mb = a.start(), b.start()
wrong = {"passwordA": b"4-purple-sausages".hex(), "passwordB": b"4-purple-sausagez".hex(), "idSymmetric": b"x".hex(),
         "scalarA": G.scalar_to_bytes(a.xy_scalar).hex(), "scalarB": G.scalar_to_bytes(b.xy_scalar).hex(),
         "messageA": ma.hex(), "messageB": mb.hex(), "keyA": a.finish(mb).hex(), "keyB": b.finish(ma).hex()}
print(json.dumps({"generator": "python3-spake2 %s" % spake2.__version__,
                  "S": params.S.to_bytes().hex(), "cases": cases, "wrongPassword": wrong}, indent=1))
