#if canImport(Glibc)
internal import Glibc
#endif
internal import PeerCrypto
internal import PeerIndex

/// Creating and loading a node's identity: the key file and the display name kept in
/// the index's settings.
package enum NodeSetup {
    static let displayNameKey = "display_name"

    /// What `initialise` did.
    package struct InitResult: Sendable {
        package let identity: Identity
        /// True when a new key pair was made; false when an existing one was kept.
        package let createdIdentity: Bool
        /// True when the display name was set or changed by this call.
        package let nameChanged: Bool
    }

    /// Creates the home, the index and the identity if they are missing. An existing key is
    /// always kept (there is no way to replace it by accident); a given name replaces the
    /// stored one.
    package static func initialise(home: NodeHome, name: String?) throws(EngineError) -> InitResult {
        let requestedName = try name.map { (n: String) throws(EngineError) -> String in try DisplayName.validate(n) }
        try home.create()
        let index = try openIndex(home)

        let keyPair: KeyPair
        let created: Bool
        do {
            keyPair = try IdentityKeyFile.load(home: home)
            created = false
        } catch .notInitialised {
            keyPair = KeyPair.generate()
            try IdentityKeyFile.create(keyPair, home: home)
            created = true
        }

        let stored = try storedName(index)
        let finalName = requestedName ?? stored ?? DisplayName.fromHostName(hostName())
        let changed = finalName != stored
        if changed {
            do { try index.setSetting(displayNameKey, finalName) } catch { throw .index(error) }
        }
        return InitResult(identity: Identity(keyPair: keyPair, displayName: finalName),
                          createdIdentity: created, nameChanged: changed)
    }

    /// Loads the identity of an initialised home; `notInitialised` if there is none.
    package static func loadIdentity(home: NodeHome) throws(EngineError) -> Identity {
        let keyPair = try IdentityKeyFile.load(home: home)
        let index = try openIndex(home)
        let name = try storedName(index) ?? DisplayName.fromHostName(hostName())
        return Identity(keyPair: keyPair, displayName: name)
    }

    static func openIndex(_ home: NodeHome) throws(EngineError) -> NodeIndex {
        do { return try NodeIndex.open(at: home.indexFile) } catch { throw .index(error) }
    }

    static func storedName(_ index: NodeIndex) throws(EngineError) -> String? {
        do { return try index.setting(displayNameKey) } catch { throw .index(error) }
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "syncpeer" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
