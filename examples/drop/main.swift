// syncpeer-drop: drops a file on a nearby peer, with a progress bar from the Progress.
//
//   terminal 1: syncpeer-drop --home /tmp/bob   --name bob   --listen 127.0.0.1:7002 --dir /tmp/inbox
//   terminal 2: syncpeer-drop --home /tmp/alice --name alice --connect 127.0.0.1:7002 --send photo.jpg
//
// The receiving side accepts every invitation and every file (into --dir) and keeps
// running; the sending side exits when the file is in place (status 0) or failed (1).
import Foundation
import Syncpeer

/// Writes a line to standard output at once (a pipe, as the tests read it, sees each line
/// as it is said). Not `print` + `fflush(nil)`: glibc's flush of every stream waits for the
/// lock of standard input, which a blocked `readLine()` holds.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let key = arguments.popFirst(), key.hasPrefix("--"), let value = arguments.popFirst() { options[String(key.dropFirst(2))] = value }
guard let home = options["home"], let name = options["name"] else {
    say("usage: syncpeer-drop --home DIR --name NAME (--listen HOST:PORT --dir DIR | --connect HOST:PORT --send FILE)")
    exit(2)
}

var configuration = Session.Configuration(displayName: name)
configuration.listen = options["listen"] ?? "127.0.0.1:0"
configuration.receiveDirectory = options["dir"]
let session = try Session(home: home, configuration: configuration)
say("listening on \(session.address) as \(session.myPeerID)")

if let address = options["connect"], let file = options["send"] {
    let peer = try await session.invite(address, context: "file drop")
    let url = URL(fileURLWithPath: file)
    let finished = AsyncStream<SyncpeerError?>.makeStream()
    let progress = session.sendResource(at: url, to: peer) { error in finished.continuation.yield(error) }
    let bar = Task {
        while !Task.isCancelled {
            let filled = Int(progress.fractionCompleted * 30)
            say("[\(String(repeating: "#", count: filled))\(String(repeating: "-", count: 30 - filled))] \(Int(progress.fractionCompleted * 100))% \(progress.completedUnitCount)/\(max(progress.totalUnitCount, 0)) bytes")
            try? await Task.sleep(for: .milliseconds(200))
        }
    }
    var outcome: SyncpeerError?
    for await error in finished.stream { outcome = error; break }
    bar.cancel()
    session.close()
    if let outcome {
        say("failed: \(outcome)")
        exit(1)
    }
    say("[\(String(repeating: "#", count: 30))] 100% sent \(url.lastPathComponent) to \(peer.displayName)")
    exit(0)
}

let invitations = Advertiser(session: session).invitations
Task {
    for await invitation in invitations {
        say("invitation from \(invitation.peer.displayName), code \(invitation.code): accepted")
        try? invitation.accept()
    }
}
for await event in session.events {
    switch event {
    case let .resourceOffered(offer):
        say("\(offer.peer.displayName) drops \(offer.name) (\(offer.totalBytes) bytes): accepted")
        try? session.acceptResource(offer)
    case let .resourceFinished(name, peer, .completed(url)):
        say("received \(name) from \(peer.displayName) → \(url?.path ?? "?")")
    case let .resourceFinished(name, peer, state):
        say("\(name) from \(peer.displayName) did not arrive: \(state)")
    case let .eventsDropped(count):
        say("(\(count) events missed)")
    default:
        break
    }
}
