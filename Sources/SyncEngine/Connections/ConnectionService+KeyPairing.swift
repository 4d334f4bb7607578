internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerIndex

extension ConnectionService {
    static let maxPinnedAddresses = 8

    /// Records the node holding `publicKey` as paired (`pair --code`): its key pinned, its
    /// addresses first among those stored (at most 8, each HOST:PORT), a `paired` event
    /// with code `wormhole`. Refuses this node's own key and a blocked device.
    func pin(publicKey: PublicKey, name: String, addresses: [String]) throws(EngineError) -> PeerRef {
        let result: Result<PeerRef, EngineError> = queue.sync {
            do {
                guard publicKey != identity.keyPair.publicKey else { throw EngineError.invalidArgument("that is this node's own key") }
                let device = DeviceID(publicKey: publicKey).compact
                let existing = try index.peer(deviceID: device)
                if existing?.trust == .blocked { throw EngineError.refused("\(name) is blocked on this node") }
                // As for an invitation: a new key may not take the name of a paired peer.
                if try index.peers().contains(where: { $0.trust == .paired && $0.deviceID != device && Self.sameName($0.name, name) }) {
                    throw EngineError.refused("another paired peer is called \(name): rename one of them ('syncpeer rename') and pair again")
                }
                var stored: [String] = []
                for address in addresses + (existing?.addresses ?? []) where Self.isDialable(address) && !stored.contains(address) {
                    stored.append(address)
                }
                let time = now()
                let record = PeerRecord(deviceID: device, name: name, publicKey: publicKey.bytes, trust: .paired,
                                        autoAccept: existing?.autoAccept ?? false, autoAcceptFolders: existing?.autoAcceptFolders ?? false,
                                        firstSeen: existing?.firstSeen ?? time, lastSeen: existing?.lastSeen, pairedAt: time,
                                        addresses: Array(stored.prefix(Self.maxPinnedAddresses)))
                try index.upsertPeer(record)
                let peer = try peerRef(record)
                emit(.paired(.init(peer: peer, code: "wormhole", time: time)))
                return .success(peer)
            } catch {
                return .failure(.wrapping(error))
            }
        }
        return try result.get()
    }

    /// HOST:PORT with a port and a host that is not the unspecified address.
    static func isDialable(_ address: String) -> Bool {
        guard address.utf8.count <= 300, let colon = address.lastIndex(of: ":"),
              let port = UInt16(address[address.index(after: colon)...]), port != 0 else { return false }
        let host = address[..<colon].trimming { $0 == "[" || $0 == "]" }
        return !host.isEmpty && host != "0.0.0.0" && host != "::"
    }
}
