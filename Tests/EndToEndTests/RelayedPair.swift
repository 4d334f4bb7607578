import Foundation
import Testing

extension RelayTests {
    /// Alice and bob paired directly (each pinned the other's certificate ID), then both back
    /// on new ports, so the relay at `url` is the only way between them; returns once alice's
    /// session with bob runs through it, with the port bob listened on before (the address
    /// alice stored for him, where nothing answers now). The caller stops both.
    func relayedPair(_ env: SyncpeerRunner, relay url: String, environment: [String: String])
        throws -> (alice: DaemonProcess, bob: DaemonProcess, storedBobPort: UInt16) {
        let arguments = ["--auto-accept", "--relay", url]
        var alice = try DaemonProcess(env, name: "alice", arguments: arguments, environment: environment)
        var bob = try DaemonProcess(env, name: "bob", arguments: arguments, environment: environment)
        _ = try env.pair(alice, bob, autoAccepted: true)
        try eventually("certificate IDs exchanged") {
            try peer(env, alice, named: "bob")?["certificateID"] != nil && peer(env, bob, named: "alice")?["certificateID"] != nil
        }
        let storedBobPort = bob.port
        _ = alice.stop()
        _ = bob.stop()
        alice = try DaemonProcess(env, name: "alice", home: alice.home, arguments: arguments, environment: environment)
        bob = try DaemonProcess(env, name: "bob", home: bob.home, arguments: arguments, environment: environment)
        try eventually("alice's session with bob runs through the relay") {
            try peer(env, alice, named: "bob")?["path"] as? String == "relay 127.0.0.1"
        }
        return (alice, bob, storedBobPort)
    }
}

extension SyncpeerRunner {
    /// `syncpeer pair CERTIFICATE-ID` from `daemon` to `other` through the relay they joined;
    /// returns `other`'s certificate ID and the last answer. `other` must have joined the relay
    /// before `daemon` asks it for it: until then the relay answers that it is not there.
    func pairByCertificateID(_ daemon: DaemonProcess, with other: DaemonProcess) throws -> (id: String, result: Result) {
        let id = try #require(try cli(other, ["id", "--json"]).stdout.data(using: .utf8)
            .flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: String] }?["certificateID"])
        var paired = try cli(daemon, ["pair", id, "--json"])
        // The peer may not have joined the relay yet, or (with a relay pool) the relay may not be chosen yet.
        for _ in 0..<20 where paired.status != 0 && (paired.stderr.contains("not there") || paired.stderr.contains("not chosen")) {
            Thread.sleep(forTimeInterval: 0.5)
            paired = try cli(daemon, ["pair", id, "--json"])
        }
        return (id, paired)
    }
}
