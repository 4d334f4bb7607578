// Opens a node in the home given (created on first use), prints its peer ID and stops it:
// the smallest program on syncpeer's public API, from another package.
import Foundation
import Syncpeer

let home = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "/tmp/syncpeer-dependent"
do {
    let session = try Session(home: home, configuration: Session.Configuration(displayName: "dependent"))
    print("\(session.myPeerID.displayName) \(session.myPeerID.deviceID)")
    session.close()
} catch {
    print("syncpeer-dependent: \(error)")
    exit(1)
}
