/// The name people see for a node. It is not an identity (the device ID is): two nodes
/// may share a name. Rules as in Multipeer Connectivity: 1–63 bytes of UTF-8; we also
/// refuse control characters, which would garble terminals and logs.
package enum DisplayName {
    package static let maxBytes = 63

    /// Returns the name unchanged if it follows the rules, or throws saying which it breaks.
    package static func validate(_ name: String) throws(EngineError) -> String {
        let bytes = name.utf8.count
        if bytes == 0 { throw .invalidDisplayName("it is empty") }
        if bytes > maxBytes {
            throw .invalidDisplayName("it is \(bytes) bytes of UTF-8; at most \(maxBytes) are allowed")
        }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw .invalidDisplayName("it contains a control character")
        }
        return name
    }

    /// A default from the host name, cut to the limit at a character boundary.
    package static func fromHostName(_ host: String) -> String {
        var name = ""
        for character in host where !character.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            if name.utf8.count + String(character).utf8.count > maxBytes { break }
            name.append(character)
        }
        return name.isEmpty ? "syncpeer" : name
    }
}
