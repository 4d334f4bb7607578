internal import Dispatch
internal import Synchronization
internal import PeerIndex

extension Node {
    /// `syncpeer rename NAME`: this node's display name, kept in the index (as `init --name`
    /// does) and in force at once: nearby nodes see it as discovery announces it again, and
    /// peers at their next connection (the name travels in the hello).
    package func rename(to text: String) throws(EngineError) -> RenameResult {
        let name = try DisplayName.validate(text)
        do { try index.setSetting(NodeSetup.displayNameKey, name) } catch { throw .index(error) }
        displayName.withLock { $0 = name }
        let advertised: (port: UInt16, host: String)? = queue.sync {
            connections.identity.displayName = name
            return discovery == nil ? nil : (connections.listenPort, connections.listenHost)
        }
        if let advertised {
            stopDiscovery()
            try startDiscovery(port: advertised.port, host: advertised.host)
        }
        return RenameResult(id: identity.deviceID, name: name)
    }
}
