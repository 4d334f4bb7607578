// syncpeer-mirror: keeps a folder mirrored on a peer (and back: both sides sync).
//
//   terminal 1: syncpeer-mirror --home /tmp/bob   --name bob   --listen 127.0.0.1:7003 --dir /tmp/mirror
//   terminal 2: syncpeer-mirror --home /tmp/alice --name alice --connect 127.0.0.1:7003 --dir ~/notes
//
// The connecting side shares --dir; the listening side accepts it into --dir. Both keep
// running and print what the folder does; a conflict is listed, never lost.
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
guard let home = options["home"], let name = options["name"], let directory = options["dir"] else {
    say("usage: syncpeer-mirror --home DIR --name NAME --dir DIR (--listen HOST:PORT | --connect HOST:PORT)")
    exit(2)
}

var configuration = Session.Configuration(displayName: name)
configuration.listen = options["listen"] ?? "127.0.0.1:0"
configuration.receiveDirectory = directory
let session = try Session(home: home, configuration: configuration)
say("listening on \(session.address) as \(session.myPeerID)")
let events = session.events

if let address = options["connect"] {
    let peer = try await session.invite(address, context: "mirror")
    let folder = try session.share(folder: URL(fileURLWithPath: directory), with: [peer])
    say("sharing \(directory) with \(peer.displayName) as \(folder)")
} else {
    let invitations = Advertiser(session: session).invitations
    Task {
        for await invitation in invitations {
            say("invitation from \(invitation.peer.displayName), code \(invitation.code): accepted")
            try? invitation.accept()
        }
    }
}

for await event in events {
    switch event {
    case let .folderOffered(folderID, label, peer):
        say("\(peer.displayName) shares \(label): accepted into \(directory)")
        do { try session.acceptFolder(folderID, into: directory) } catch { say("cannot accept: \(error)") }
    case let .folderChanged(folderID, state):
        say("folder \(folderID): \(state)")
        guard state == .idle else { break }
        do {
            for conflict in try session.conflicts {
                say("conflict: \(conflict.original): \(conflict.versions.map { "\($0.deviceName) \($0.path)" }.joined(separator: ", "))")
            }
        } catch {
            say("cannot list conflicts: \(error)")
        }
    case let .eventsDropped(count):
        say("(\(count) events missed)")
    default:
        break
    }
}
