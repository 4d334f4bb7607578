// dependent: syncpeer's public API used from another package, which names syncpeer by URL
// and version (Package.swift).
//
//   dependent HOME                           opens a node in HOME (made on first use) and
//                                            prints its name and peer ID
//   dependent HOME --send FILE --to HOST:PORT
//                                            then pairs with the node at HOST:PORT, which must
//                                            accept (`syncpeer daemon --auto-accept`, or a person
//                                            at `syncpeer invitations`), sends it FILE and prints
//                                            "sent NAME to PEER"
import Foundation
import Syncpeer

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("dependent: \(text)\n".utf8))
    exit(1)
}

var options: [String: String] = [:]
var positional: [String] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument.hasPrefix("--") {
        guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
        options[String(argument.dropFirst(2))] = value
    } else {
        positional.append(argument)
    }
}
guard positional.count <= 1, (options["send"] == nil) == (options["to"] == nil) else {
    fail("usage: dependent [HOME] [--send FILE --to HOST:PORT]")
}

/// The whole program in one function: a top-level variable of main.swift belongs to the
/// main actor, and nothing here needs it.
func run(home: String, file: String?, address: String?) async throws(SyncpeerError) {
    let session = try Session(home: home, configuration: Session.Configuration(displayName: "dependent"))
    defer { session.close() }
    print("\(session.myPeerID.displayName) \(session.myPeerID.deviceID)")
    guard let file, let address else { return }
    let peer = try await session.invite(address, context: "dependent")
    print("paired with \(peer.displayName)")
    let url = URL(fileURLWithPath: file)
    let failure = await withCheckedContinuation { (finished: CheckedContinuation<SyncpeerError?, Never>) in
        _ = session.sendResource(at: url, to: peer) { finished.resume(returning: $0) }
    }
    if let failure { throw failure }
    print("sent \(url.lastPathComponent) to \(peer.displayName)")
}

do {
    try await run(home: positional.first ?? "/tmp/syncpeer-dependent", file: options["send"], address: options["to"])
} catch {
    fail("\(error)")
}
