internal import Dispatch
internal import PeerCrypto

/// `status` says how each folder member is reached, as `peers` does: the live session's path
/// and its last round trip (from the connections, on the node's queue).
extension Node {
    func withPaths(_ page: ListPage<FolderStatus>) -> ListPage<FolderStatus> {
        let live: [String: (path: String, roundTripMs: Double?)] = queue.sync {
            var facts: [String: (path: String, roundTripMs: Double?)] = [:]
            for session in connections.sessions.values where session.machine.state == .connected {
                facts[session.deviceKey] = (session.path, session.roundTripMs)
            }
            return facts
        }
        return page.map { folder in
            var folder = folder
            for i in folder.peers.indices {
                guard let fact = live[folder.peers[i].peer.id.compact] else { continue }
                folder.peers[i].path = fact.path
                folder.peers[i].roundTripMs = fact.roundTripMs
            }
            return folder
        }
    }
}
