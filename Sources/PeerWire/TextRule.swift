/// The rules a text field of the wire format follows: its size in UTF-8 bytes and which
/// control characters it may contain.
///
/// Text from a peer ends up on someone's terminal (names, reasons, invitation context), so
/// control characters (C0, DEL, C1: escape sequences among them) are refused at the wire.
struct TextRule {
    var minBytes = 0
    var maxBytes: Int
    /// Allows line feed and tab, for multi-line text such as an invitation context.
    var allowsLineBreaks = false

    func check(_ text: String, _ field: String) throws(WireError) {
        let length = text.utf8.count
        guard length <= maxBytes else { throw .fieldTooLong(field: field, length: length, limit: maxBytes) }
        guard length >= minBytes else { throw .fieldTooShort(field: field, length: length, minimum: minBytes) }
        for scalar in text.unicodeScalars where Self.isControl(scalar) {
            if allowsLineBreaks && (scalar == "\n" || scalar == "\t") { continue }
            throw .controlCharacter(field: field)
        }
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    static let closeReason = TextRule(maxBytes: WireLimits.maxCloseReason)
    static let streamName = TextRule(minBytes: 1, maxBytes: WireLimits.maxStreamName)
    static let displayName = TextRule(minBytes: 1, maxBytes: WireLimits.maxDisplayName)
    static let softwareVersion = TextRule(maxBytes: WireLimits.maxSoftwareVersion)
    static let feature = TextRule(minBytes: 1, maxBytes: WireLimits.maxFeatureName)
    static let context = TextRule(maxBytes: WireLimits.maxContext, allowsLineBreaks: true)
    static let offerName = TextRule(minBytes: 1, maxBytes: WireLimits.maxOfferName)
    static let entryPath = TextRule(minBytes: 1, maxBytes: WireLimits.maxEntryPath)
    static let transferReason = TextRule(maxBytes: WireLimits.maxCloseReason)
    static let folderID = TextRule(minBytes: 1, maxBytes: WireLimits.maxFolderID)
    static let folderLabel = TextRule(maxBytes: WireLimits.maxOfferName)
    static let symlinkTarget = TextRule(maxBytes: WireLimits.maxEntryPath)
    static let deviceKey = TextRule(minBytes: 1, maxBytes: 64)
}
