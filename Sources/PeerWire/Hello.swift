/// The payload of the Noise handshake messages: who a node is and what it speaks.
///
/// Both sides send one (the initiator in handshake message 1 or 3, the responder in message 2).
/// It is not a frame: it has its own layout, which starts with the magic `SPH1` so that a
/// payload from something that is not syncpeer is recognised as such.
///
/// ```
///  magic "SPH1" (53 50 48 31)
///  protocol version u16
///  len u8, display name        (1 … 63 bytes, no control characters)
///  len u8, software version    (0 … 64 bytes, no control characters)
///  count u8 (0 … 16), then per feature: len u8, name (1 … 32 bytes, no control characters)
///  has context u8 (0 or 1), then if 1: len u16, context (0 … 1,024 bytes; may hold \n and \t)
///  has listen port u8 (0 or 1), then if 1: port u16 (1 … 65,535)
/// ```
///
/// The layout is fixed for the `SPH1` magic and trailing bytes are an error. New capabilities are
/// announced as ``features`` and negotiated there, never by appending fields; a different layout
/// would need a new magic.
package struct Hello: Equatable, Sendable {
    /// The magic bytes at the start of every encoded hello: ASCII `SPH1`.
    package static let magic: [UInt8] = [0x53, 0x50, 0x48, 0x31]
    /// The protocol version this module implements (also `SecureChannel.protocolVersion`,
    /// the handshake's). Version 3 changed the content hash of chunks and manifests from
    /// BLAKE2b-256 to SHA-256, version 4 from SHA-256 to BLAKE3, so peers of an older
    /// version cannot sync with it.
    package static let currentProtocolVersion: UInt16 = 4

    /// Version of the frame protocol the node speaks.
    package var protocolVersion: UInt16
    /// The name people see (1 … ``WireLimits/maxDisplayName`` bytes of UTF-8); not an identity.
    package var displayName: String
    /// The node's software, for diagnostics (e.g. `syncpeer 0.1.0`).
    package var softwareVersion: String
    /// Optional capabilities the node supports (at most ``WireLimits/maxFeatures``).
    package var features: [String]
    /// Why the node connects, when this connection is an invitation (which folder, which file).
    package var context: String?
    /// The TCP port the node listens on, when it accepts connections: the responder of a
    /// handshake redials the initiator at the initiator's address and this port (the
    /// initiator's source port is ephemeral). Port 0 is not a valid listen port.
    package var listenPort: UInt16?

    package init(
        protocolVersion: UInt16 = Hello.currentProtocolVersion,
        displayName: String,
        softwareVersion: String,
        features: [String] = [],
        context: String? = nil,
        listenPort: UInt16? = nil
    ) {
        self.protocolVersion = protocolVersion
        self.displayName = displayName
        self.softwareVersion = softwareVersion
        self.features = features
        self.context = context
        self.listenPort = listenPort
    }

    /// Throws unless every field is within its limit, so that ``encode()`` may encode it.
    package func validate() throws(WireError) {
        try TextRule.displayName.check(displayName, "display name")
        try TextRule.softwareVersion.check(softwareVersion, "software version")
        guard features.count <= WireLimits.maxFeatures else {
            throw .tooManyEntries(field: "feature list", count: features.count, limit: WireLimits.maxFeatures)
        }
        for feature in features {
            try TextRule.feature.check(feature, "feature name")
        }
        if let context {
            try TextRule.context.check(context, "invitation context")
        }
        if listenPort == 0 {
            throw .invalidValue(field: "listen port", value: 0)
        }
    }

    /// The encoded hello.
    ///
    /// - Precondition: the hello is valid (``validate()`` does not throw); validate a hello built
    ///   from configuration when the configuration is loaded.
    package func encode() -> [UInt8] {
        do {
            try validate()
        } catch {
            preconditionFailure("Hello.encode: \(error)")
        }
        var writer = ByteWriter()
        writer.raw(Self.magic)
        writer.u16(protocolVersion)
        writer.prefixedText(displayName, .u8)
        writer.prefixedText(softwareVersion, .u8)
        writer.u8(UInt8(features.count))
        for feature in features {
            writer.prefixedText(feature, .u8)
        }
        if let context {
            writer.u8(1)
            writer.prefixedText(context, .u16)
        } else {
            writer.u8(0)
        }
        if let listenPort {
            writer.u8(1)
            writer.u16(listenPort)
        } else {
            writer.u8(0)
        }
        assert(writer.bytes.count <= WireLimits.maxHello)
        return writer.bytes
    }

    /// Decodes a hello from a handshake payload, checking every limit.
    package static func decode(_ bytes: some Collection<UInt8>) throws(WireError) -> Hello {
        let count = bytes.count
        guard count <= WireLimits.maxHello else {
            throw .helloTooLarge(length: count, limit: WireLimits.maxHello)
        }
        var reader = ByteReader(Array(bytes))
        guard reader.remaining >= magic.count, try reader.bytes(magic.count, "hello magic") == magic else {
            throw .badMagic
        }
        let version = try reader.u16("protocol version")
        let name = try reader.prefixedText(.u8, rule: .displayName, "display name")
        let software = try reader.prefixedText(.u8, rule: .softwareVersion, "software version")
        let featureCount = Int(try reader.u8("feature count"))
        guard featureCount <= WireLimits.maxFeatures else {
            throw .tooManyEntries(field: "feature list", count: featureCount, limit: WireLimits.maxFeatures)
        }
        var features: [String] = []
        features.reserveCapacity(featureCount)
        for _ in 0..<featureCount {
            features.append(try reader.prefixedText(.u8, rule: .feature, "feature name"))
        }
        let context: String?
        switch try reader.u8("context flag") {
        case 0: context = nil
        case 1: context = try reader.prefixedText(.u16, rule: .context, "invitation context")
        case let flag: throw .invalidValue(field: "context flag", value: UInt64(flag))
        }
        let listenPort: UInt16?
        switch try reader.u8("listen port flag") {
        case 0: listenPort = nil
        case 1:
            let port = try reader.u16("listen port")
            guard port != 0 else { throw .invalidValue(field: "listen port", value: 0) }
            listenPort = port
        case let flag: throw .invalidValue(field: "listen port flag", value: UInt64(flag))
        }
        try reader.expectEnd(after: "hello")
        return Hello(
            protocolVersion: version, displayName: name, softwareVersion: software,
            features: features, context: context, listenPort: listenPort)
    }
}
