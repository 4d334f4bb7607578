/// Every size limit of the wire format, in one place.
///
/// Decoders check each announced length against these limits *before* they allocate or wait
/// for the bytes it announces, so a hostile peer cannot make us buffer more than a limit.
/// Encoders check the same limits (see ``Frame/validate()`` and ``Hello/validate()``).
package enum WireLimits {
    // MARK: Noise transport framing

    /// Size of the big-endian length prefix in front of every Noise message on TCP.
    package static let noiseLengthPrefixSize = 2
    /// Largest Noise message (ciphertext including the tag): the 2-byte length prefix allows no more.
    package static let maxNoiseMessage = 65_535
    /// Size of the ChaCha20-Poly1305 authentication tag in every Noise transport message.
    package static let noiseTagSize = 16
    /// Largest plaintext carried by one Noise transport message.
    package static let maxNoisePlaintext = maxNoiseMessage - noiseTagSize  // 65,519

    // MARK: Application frames

    /// Size of a frame header: 1-byte type, 4-byte big-endian body length.
    package static let frameHeaderSize = 5
    /// Largest body of any frame type, present or future: a 16 MiB chunk plus 1 KiB of header fields.
    package static let maxFrameBody = 16 * 1024 * 1024 + 1024  // 16,778,240

    /// Largest body of an application message (``Frame/message(id:body:)``).
    package static let maxMessageBody = 65_536
    /// Largest reason of a ``Frame/close(code:reason:)`` frame, in UTF-8 bytes.
    package static let maxCloseReason = 512
    /// Largest name of a stream (``Frame/streamOpen(id:name:)``), in UTF-8 bytes; names are not empty.
    package static let maxStreamName = 255
    /// Largest payload of one ``Frame/streamData(id:bytes:)`` frame.
    package static let maxStreamData = 65_536

    /// Largest offer name (a file or folder name), in UTF-8 bytes.
    package static let maxOfferName = 255
    /// Largest relative path of an offer entry, in UTF-8 bytes.
    package static let maxEntryPath = 4_096
    /// Most files in one offer (a folder).
    package static let maxOfferEntries = 100_000
    /// Largest encoded manifest of one entry.
    package static let maxManifest = 12 * 1024 * 1024
    /// Largest chunk of a transfer.
    package static let maxChunk = 16 * 1024 * 1024
    /// Largest "have" bitmap of an accept (one bit per chunk of the whole offer).
    package static let maxHaveBitmap = 1 << 20

    /// Largest folder ID, in bytes.
    package static let maxFolderID = 64
    /// Most devices in one version vector.
    package static let maxVersionEntries = 256
    /// Most block sums in one ``Frame/blockDeltaRequest(request:folder:path:offset:size:hash:sums:)``:
    /// one per 16 KiB block of the largest chunk.
    package static let maxDeltaSums = maxChunk / (16 * 1024)
    /// Bytes of each block sum of a delta request.
    package static let deltaSumSize = 8
    /// Most file entries in one index update frame.
    package static let maxIndexEntries = 10_000
    /// Largest block of an ``Frame/indexBlocks(folder:blocks:)`` frame (a small file's whole
    /// content), and the most blocks in one: as many as an index update's entries.
    package static let maxIndexBlock = 16 * 1024
    /// Most versions in one ``VersionPage``.
    package static let maxVersionPage = 1_000
    /// Largest encoded ``VersionPage`` of a version response (a page, or one version with its manifest).
    package static let maxVersionResponse = 14 * 1024 * 1024
    /// Most paths in a ``Frame/folderSelection(folder:paths:)`` (a node's selection holds no more).
    package static let maxSelectionPaths = 1_000
    /// Most chunks of a file a ``Frame/chunkHave(folder:path:root:count:bitmap:)`` describes
    /// (a manifest of the largest file FastCDC cuts has fewer).
    package static let maxHeldChunks = 1 << 20
    /// The bitmap of a `chunkHave` of `count` chunks: one bit each, ceil(count / 8) bytes.
    package static func heldBitmapSize(_ count: UInt32) -> Int { (Int(count) + 7) / 8 }
    /// Most chunks in one ``Frame/growingFile(folder:path:scan:size:offset:chunks:)``.
    package static let maxGrowingChunks = 1_024
    /// The largest TLS certificate a `certificate` frame carries (syncpeer's are ~300 bytes).
    package static let maxCertificate = 2_048

    /// Allowed body lengths of each frame type; the frame reader rejects a header outside this
    /// range as soon as the header is complete.
    ///
    /// Each range follows from the body layout documented on ``FrameType``.
    package static func bodyLengthRange(of type: FrameType) -> ClosedRange<Int> {
        let range: ClosedRange<Int>
        switch type {
        case .ping, .pong: range = 8...8                             // nonce u64
        case .close: range = 4...(4 + maxCloseReason)                // code u16, reason len u16, reason
        case .pairing: range = 1...1                                 // status u8
        case .certificate: range = 3...(2 + maxCertificate)           // len u16, certificate DER
        case .message: range = 12...(12 + maxMessageBody)            // id u64, body len u32, body
        case .streamOpen: range = 6...(5 + maxStreamName)            // id u32, name len u8, name (≥ 1)
        case .streamData: range = 8...(8 + maxStreamData)            // id u32, data len u32, data
        case .streamClose: range = 4...4                             // id u32
        case .streamCredit: range = 8...8                            // id u32, bytes u32
        case .streamReset: range = 6...(6 + maxCloseReason)          // id u32, reason len u16, reason
        case .offer: range = 23...maxFrameBody                       // id, kind, name (≥ 1), count, entries
        case .accept: range = 20...(20 + maxHaveBitmap)              // id, bitmap len u32, bitmap
        case .decline, .cancel: range = 18...(18 + maxCloseReason)   // id, reason len u16, reason
        case .done: range = 19...(19 + maxCloseReason)               // id, ok u8, reason len u16, reason
        case .resent: range = 24...24                                // id, bytes u64
        case .chunk: range = 24...(24 + maxChunk)                    // id, index u32, len u32, data
        case .chunkAck: range = 21...21                              // id, index u32, ok u8
        case .hashedChunk: range = 56...(56 + maxChunk)              // id, index u32, hash 32 B, len u32, data
        case .shareOffer: range = 3...(2 + maxFolderID + maxOfferName)  // folder len u8, folder, label len u8, label
        case .shareAnswer: range = 5...(4 + maxFolderID + maxCloseReason) // folder, accepted u8, reason len u16, reason
        case .indexUpdate: range = 7...maxFrameBody                  // folder, full u8, count u32, entries
        case .indexAck: range = 10...(9 + maxFolderID)               // folder, sequence u64
        case .blockRequest: range = 53...(51 + maxFolderID + maxEntryPath) // request u32, folder, path, offset, size, hash
        case .blockResponse: range = 9...(9 + maxChunk)              // request u32, ok u8, len u32, data
        case .blockDeltaRequest:                                     // a block request, sum count u16, sums
            range = 55...(53 + maxFolderID + maxEntryPath + maxDeltaSums * deltaSumSize)
        case .indexBlocks: range = 4...maxFrameBody                  // folder, count u16, per block: len u16, bytes
        case .versionRequest: range = 26...(24 + maxFolderID + maxEntryPath) // request u32, folder, path, tree u8, before u64, version u64
        case .versionResponse: range = 9...(9 + maxVersionResponse)  // request u32, ok u8, len u32, page
        case .folderSelection:                                       // folder, count u16, per path: len u16, path
            range = 4...(3 + maxFolderID + maxSelectionPaths * (2 + maxEntryPath))
        case .chunkHave:                                             // folder, path, root 32 B, count u32, bitmap
            range = 42...(1 + maxFolderID + 2 + maxEntryPath + 36 + maxHeldChunks / 8)
        case .growingFile:                                           // folder, path, scan, size, offset u64, count u16, chunks
            range = 31...(1 + maxFolderID + 2 + maxEntryPath + 26 + maxGrowingChunks * 36)
        }
        assert(range.upperBound <= maxFrameBody)
        return range
    }

    // MARK: Hello (Noise handshake payload)

    /// Largest display name, in UTF-8 bytes; display names are not empty.
    package static let maxDisplayName = 63
    /// Largest software version string, in UTF-8 bytes.
    package static let maxSoftwareVersion = 64
    /// Most feature names a hello may list.
    package static let maxFeatures = 16
    /// Largest feature name, in UTF-8 bytes; feature names are not empty.
    package static let maxFeatureName = 32
    /// Largest invitation context, in UTF-8 bytes.
    package static let maxContext = 1_024
    /// Largest encoded hello we accept. A Noise XX handshake message also carries an ephemeral
    /// key, an encrypted static key and tags (at most 96 bytes), so this always fits in one message.
    /// The field limits above keep a real hello under 2 KiB.
    package static let maxHello = 60_000
}
