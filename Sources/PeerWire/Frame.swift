/// An application frame: the typed unit that syncpeer peers exchange once the secure channel
/// is up. PeerWire is the wire format of syncpeer: pure value types and codecs, no I/O.
///
/// ## Layering
///
/// ```
///  TCP byte stream
///     │  NoiseMessageReader / NoiseFraming: 2-byte big-endian length + message
///     ▼
///  Noise transport messages   (≤ 65,535 bytes: ciphertext + 16-byte tag)
///     │  decrypt with the session's cipher state (PeerCrypto, not this module)
///     ▼
///  plaintexts                 (≤ 65,519 bytes each), concatenated in order into one stream
///     │  FrameReader / FrameEncoder: 1-byte type + 4-byte big-endian body length + body
///     ▼
///  Frame values               (ping, message, close, streams, ...)
/// ```
///
/// Frames are not aligned with Noise messages: a frame may span several plaintexts (a chunk
/// will) and one plaintext may hold several frames. The sender encodes frames into a buffer,
/// cuts it into pieces of at most ``WireLimits/maxNoisePlaintext`` bytes, encrypts each piece
/// and frames the ciphertext with ``NoiseFraming``. The Noise handshake payloads carry a
/// ``Hello`` instead of frames.
///
/// ## Frame types
///
/// All integers are big-endian; `len` prefixes count bytes; text is UTF-8 without control
/// characters. The body length in the header must lie in the range below
/// (``WireLimits/bodyLengthRange(of:)``); the reader rejects it as soon as the header is in.
///
/// ```
///  code  frame        body layout                                  body bytes
///  ────  ───────────  ───────────────────────────────────────────  ──────────────
///  0x01  ping         nonce u64                                    8
///  0x02  pong         nonce u64 (echoes the ping's)                8
///  0x03  close        code u16, len u16, reason (≤ 512)            4 … 516
///  0x04  certificate  len u16, certificate DER (1 … 2,048)         3 … 2,050
///  0x10  pairing      status u8                                    1
///  0x20  message      id u64, len u32, body (≤ 65,536)             12 … 65,548
///  0x30  streamOpen   id u32, len u8, name (1 … 255)               6 … 260
///  0x31  streamData   id u32, len u32, bytes (≤ 65,536)            8 … 65,544
///  0x32  streamClose  id u32                                       4
///  0x33  streamCredit id u32, bytes u32                             8
///  0x34  streamReset  id u32, len u16, reason (≤ 512)              6 … 518
/// ```
///
/// Codes are grouped by concern, leaving room in each group: 0x00 is never used (a zeroed
/// buffer is not a frame); 0x04–0x0F connection control; 0x11–0x1F pairing; 0x21–0x2F
/// messages; 0x35–0x3F streams; 0x40–0x4F resources (offer, accept, decline, cancel);
/// 0x50–0x5F chunks; 0x60–0x6F folder index. No frame body may exceed
/// ``WireLimits/maxFrameBody`` (16 MiB + 1 KiB, room for a 16 MiB chunk).
///
/// A frame with an unknown code, a body length outside its range, or a malformed body is a
/// ``WireError``, and the connection is closed: there is no "skip unknown frame" rule, since
/// peers agree on features in the ``Hello`` before they send anything optional.
package enum Frame: Equatable, Sendable {
    /// Keepalive probe; the peer answers with a ``pong(_:)`` carrying the same nonce.
    case ping(UInt64)
    /// Answer to a ``ping(_:)``.
    case pong(UInt64)
    /// A reliable application message (chat, control) of at most ``WireLimits/maxMessageBody`` bytes.
    case message(id: UInt64, body: [UInt8])
    /// Sent by the invited side: what its user decided about the invitation.
    case pairing(PairingStatus)
    /// The sender's TLS certificate (DER), which relays and global discovery servers know it
    /// by; sent once per session to a peer whose hello lists `tls-certificate`.
    case certificate([UInt8])
    /// Orderly close; the sender closes the connection after it. The reason is for people
    /// (at most ``WireLimits/maxCloseReason`` bytes).
    case close(code: CloseCode, reason: String)
    /// Opens the named, ordered byte stream `id` (name of 1 … ``WireLimits/maxStreamName`` bytes).
    case streamOpen(id: UInt32, name: String)
    /// The next bytes of stream `id` (at most ``WireLimits/maxStreamData`` bytes).
    case streamData(id: UInt32, bytes: [UInt8])
    /// Ends stream `id`: the writer wrote everything (the stream is complete).
    case streamClose(id: UInt32)
    /// The reader of stream `id` lets the writer send `bytes` more bytes (credit-based flow
    /// control: a writer never sends more than it was granted).
    case streamCredit(id: UInt32, bytes: UInt32)
    /// Either side abandons stream `id`: it is cut, never complete (the reason is for people).
    case streamReset(id: UInt32, reason: String)
    /// A sender offers files (with their manifests).
    case offer(TransferOffer)
    /// The receiver accepts; `have` is a bitmap over all chunks of the offer (entry by entry,
    /// bit i of byte i/8, least significant bit first) of those it already holds verified.
    case accept(id: TransferID, have: [UInt8])
    /// The receiver declines.
    case decline(id: TransferID, reason: String)
    /// Either side abandons the transfer (partial data is removed).
    case cancel(id: TransferID, reason: String)
    /// The receiver reports the end: every file verified and in place (`ok`), or why not.
    case done(id: TransferID, ok: Bool, reason: String)
    /// The sender, after an accept and before the chunks it asks for: `bytes` of the
    /// transfer's chunks were or will be put on the wire a second time — re-sends in earlier
    /// attempts plus the chunks of this accept sent in an earlier one — so that both ends
    /// report the same "re-sent" figure. Sent only to a peer whose hello lists the feature
    /// `resent-bytes`.
    case resent(id: TransferID, bytes: UInt64)
    /// Chunk `index` (counted over all entries of the offer) of transfer `id`.
    case chunk(id: TransferID, index: UInt32, data: [UInt8])
    /// The receiver verified and wrote chunk `index` (`ok`), or its hash was wrong (send it again).
    case chunkAck(id: TransferID, index: UInt32, ok: Bool)
    /// Chunk `index` of an entry whose manifest streams (offered without one): its BLAKE3
    /// `hash` (32 bytes) comes with its data, and the chunk after the last one the receiver
    /// knows extends that entry's manifest. Sent only to a peer whose hello lists the
    /// feature `streamed-manifest`.
    case hashedChunk(id: TransferID, index: UInt32, hash: [UInt8], data: [UInt8])
    /// Invites the peer to share a folder.
    case shareOffer(folder: String, label: String)
    /// The answer to a share offer (or, with `accepted: false` later, an unshare).
    case shareAnswer(folder: String, accepted: Bool, reason: String)
    /// Index entries of a shared folder: all of them (`full`) or those changed since the
    /// last update the peer acknowledged.
    case indexUpdate(folder: String, full: Bool, entries: [SyncFileEntry])
    /// The receiver has applied every entry up to the sender's `sequence`.
    case indexAck(folder: String, sequence: UInt64)
    /// Asks for `size` bytes at `offset` of `path` in the folder, which must hash to `hash`.
    case blockRequest(request: UInt32, folder: String, path: String, offset: UInt64, size: UInt32, hash: [UInt8])
    /// The bytes of a block request, or `ok: false` when the file no longer holds them.
    case blockResponse(request: UInt32, ok: Bool, data: [UInt8])
    /// A block request from a peer that holds another version of the file: `sums` has the
    /// 8-byte sums of what its own file holds at that range, one per 16 KiB block (the
    /// layout is `PeerFiles.BlockDelta`'s). The answer is a ``blockResponse(request:ok:data:)``
    /// whose data is a bitmap of the blocks that differ, followed by only those blocks.
    /// Sent only to a peer whose hello lists the feature `block-delta`.
    case blockDeltaRequest(request: UInt32, folder: String, path: String, offset: UInt64, size: UInt32, hash: [UInt8], sums: [UInt8])
    /// The whole content of small files of the ``indexUpdate(folder:full:entries:)`` frame
    /// that follows it (each block 1 … ``WireLimits/maxIndexBlock`` bytes, at most
    /// ``WireLimits/maxIndexEntries`` of them), so that the receiver need not ask for them.
    /// Unordered and unnamed: the receiver hashes each block and takes it only for an entry
    /// of that page whose single chunk has that hash. Sent only to a peer whose hello lists
    /// the feature `index-blocks`.
    case indexBlocks(folder: String, blocks: [[UInt8]])
    /// Asks a member for the versions it keeps of `path` in the folder (with `tree`, of
    /// every path under it too), newest first, a page of versions older than `before` (0:
    /// from the newest); or, with `version` nonzero, for that one version with its manifest.
    /// The answer is a ``versionResponse(request:ok:data:)``.
    case versionRequest(request: UInt32, folder: String, path: String, tree: Bool, before: UInt64, version: UInt64)
    /// A ``VersionPage`` (encoded), or `ok: false` with no data: not a member, or no such folder.
    case versionResponse(request: UInt32, ok: Bool, data: [UInt8])
    /// The subtrees of the folder the sender holds (selective sync), each a folder-relative
    /// path of 1 … ``WireLimits/maxEntryPath`` bytes, at most ``WireLimits/maxSelectionPaths``;
    /// none: the whole folder. Sent when a session connects, when a share is accepted and
    /// whenever the selection changes, only to a peer whose hello lists the feature
    /// `selection`. It tells only what the sender holds (for the peer's completion figures):
    /// a receiver serves and applies exactly as without it.
    case folderSelection(folder: String, paths: [String])
    /// The chunks of a file the sender is still fetching that it holds, verified (bit i of
    /// `bitmap`: chunk i of the manifest whose root hash is `root`, which has `count` chunks),
    /// so that the receiver may ask the sender for them too (fan-out). Only a hint: the
    /// receiver verifies every chunk it fetches. Sent at a bounded rate, only to a peer whose
    /// hello lists the feature `chunk-have`.
    case chunkHave(folder: String, path: String, root: [UInt8], count: UInt32, bitmap: [UInt8])
    /// Chunks the sender cut and hashed so far of a file it is scanning now (`scan` names
    /// that one hashing of it; `size` is the file's size when it started), the first at
    /// `offset` and each following the one before; none: that hashing ended without an
    /// entry (the file changed under it), and what was said of it is void. Only a hint
    /// until the file's index entry comes: the receiver may fetch these chunks early, and
    /// verifies each. Only to a peer whose hello lists the feature `growing-files`.
    case growingFile(folder: String, path: String, scan: UInt64, size: UInt64, offset: UInt64, chunks: [GrowingChunk])

    /// The frame's type code.
    package var type: FrameType {
        switch self {
        case .ping: .ping
        case .pong: .pong
        case .message: .message
        case .pairing: .pairing
        case .close: .close
        case .certificate: .certificate
        case .streamOpen: .streamOpen
        case .streamData: .streamData
        case .streamClose: .streamClose
        case .streamCredit: .streamCredit
        case .streamReset: .streamReset
        case .offer: .offer
        case .accept: .accept
        case .decline: .decline
        case .cancel: .cancel
        case .done: .done
        case .resent: .resent
        case .chunk: .chunk
        case .chunkAck: .chunkAck
        case .hashedChunk: .hashedChunk
        case .shareOffer: .shareOffer
        case .shareAnswer: .shareAnswer
        case .indexUpdate: .indexUpdate
        case .indexAck: .indexAck
        case .blockRequest: .blockRequest
        case .blockResponse: .blockResponse
        case .blockDeltaRequest: .blockDeltaRequest
        case .indexBlocks: .indexBlocks
        case .versionRequest: .versionRequest
        case .versionResponse: .versionResponse
        case .folderSelection: .folderSelection
        case .chunkHave: .chunkHave
        case .growingFile: .growingFile
        }
    }

    /// The limits a block request and a block delta request share.
    private static func checkBlockRequest(folder: String, path: String, size: UInt32, hash: [UInt8]) throws(WireError) {
        try TextRule.folderID.check(folder, "folder id")
        try TextRule.entryPath.check(path, "block path")
        guard hash.count == 32 else { throw .invalidValue(field: "block hash length", value: UInt64(hash.count)) }
        guard size <= UInt32(WireLimits.maxChunk) else { throw .invalidValue(field: "block size", value: UInt64(size)) }
    }

    /// Throws when the frame's body, every field within its limit, is still longer than a
    /// frame may be (offers and index pages with many large manifests): such a frame is
    /// refused before it is sent, where a peer would have to end the session on reading it.
    private func checkBodyFits() throws(WireError) {
        let length = FrameEncoder.bodyLength(of: self)
        guard WireLimits.bodyLengthRange(of: type).contains(length) else {
            throw .frameTooLarge(type: type, length: length, limit: WireLimits.maxFrameBody)
        }
    }

    /// Throws unless every field is within its limit, so that ``FrameEncoder`` may encode it.
    ///
    /// Frames decoded by ``FrameReader`` are always valid; check frames built from local input
    /// (a user's message, a stream name) before sending them.
    package func validate() throws(WireError) {
        switch self {
        case .ping, .pong, .pairing, .streamClose, .streamCredit, .chunkAck, .resent:
            return
        case let .certificate(der):
            guard (1...WireLimits.maxCertificate).contains(der.count) else {
                throw .fieldTooLong(field: "certificate", length: der.count, limit: WireLimits.maxCertificate)
            }
        case let .offer(offer):
            try offer.validate()
            try checkBodyFits()
        case let .accept(_, have):
            guard have.count <= WireLimits.maxHaveBitmap else {
                throw .fieldTooLong(field: "have bitmap", length: have.count, limit: WireLimits.maxHaveBitmap)
            }
        case let .decline(_, reason), let .cancel(_, reason), let .done(_, _, reason):
            try TextRule.transferReason.check(reason, "transfer reason")
        case let .chunk(_, _, data), let .blockResponse(_, _, data):
            guard data.count <= WireLimits.maxChunk else {
                throw .fieldTooLong(field: "chunk", length: data.count, limit: WireLimits.maxChunk)
            }
        case let .hashedChunk(_, _, hash, data):
            guard hash.count == 32 else { throw .invalidValue(field: "chunk hash length", value: UInt64(hash.count)) }
            guard data.count <= WireLimits.maxChunk else {
                throw .fieldTooLong(field: "chunk", length: data.count, limit: WireLimits.maxChunk)
            }
        case let .shareOffer(folder, label):
            try TextRule.folderID.check(folder, "folder id")
            try TextRule.folderLabel.check(label, "folder label")
        case let .shareAnswer(folder, _, reason):
            try TextRule.folderID.check(folder, "folder id")
            try TextRule.transferReason.check(reason, "share reason")
        case let .indexUpdate(folder, _, entries):
            try TextRule.folderID.check(folder, "folder id")
            guard entries.count <= WireLimits.maxIndexEntries else {
                throw .tooManyEntries(field: "index entries", count: entries.count, limit: WireLimits.maxIndexEntries)
            }
            for entry in entries { try entry.validate() }
            try checkBodyFits()
        case let .indexAck(folder, _):
            try TextRule.folderID.check(folder, "folder id")
        case let .blockRequest(_, folder, path, _, size, hash):
            try Self.checkBlockRequest(folder: folder, path: path, size: size, hash: hash)
        case let .blockDeltaRequest(_, folder, path, _, size, hash, sums):
            try Self.checkBlockRequest(folder: folder, path: path, size: size, hash: hash)
            guard sums.count % WireLimits.deltaSumSize == 0, sums.count / WireLimits.deltaSumSize <= WireLimits.maxDeltaSums else {
                throw .fieldTooLong(field: "block sums", length: sums.count, limit: WireLimits.maxDeltaSums * WireLimits.deltaSumSize)
            }
        case let .indexBlocks(folder, blocks):
            try TextRule.folderID.check(folder, "folder id")
            guard blocks.count <= WireLimits.maxIndexEntries else {
                throw .tooManyEntries(field: "index blocks", count: blocks.count, limit: WireLimits.maxIndexEntries)
            }
            for block in blocks where block.isEmpty || block.count > WireLimits.maxIndexBlock {
                throw .invalidValue(field: "index block length", value: UInt64(block.count))
            }
            try checkBodyFits()
        case let .versionRequest(_, folder, path, _, _, _):
            try TextRule.folderID.check(folder, "folder id")
            try TextRule.entryPath.check(path, "version path")
        case let .versionResponse(_, _, data):
            guard data.count <= WireLimits.maxVersionResponse else {
                throw .fieldTooLong(field: "version page", length: data.count, limit: WireLimits.maxVersionResponse)
            }
        case let .folderSelection(folder, paths):
            try TextRule.folderID.check(folder, "folder id")
            guard paths.count <= WireLimits.maxSelectionPaths else {
                throw .tooManyEntries(field: "selected paths", count: paths.count, limit: WireLimits.maxSelectionPaths)
            }
            for path in paths { try TextRule.entryPath.check(path, "selected path") }
        case let .chunkHave(folder, path, root, count, bitmap):
            try TextRule.folderID.check(folder, "folder id")
            try TextRule.entryPath.check(path, "held file path")
            guard root.count == 32 else { throw .invalidValue(field: "held file root length", value: UInt64(root.count)) }
            guard count >= 1, count <= UInt32(WireLimits.maxHeldChunks) else {
                throw .invalidValue(field: "held file chunk count", value: UInt64(count))
            }
            guard bitmap.count == WireLimits.heldBitmapSize(count) else {
                throw .invalidValue(field: "held chunks bitmap length", value: UInt64(bitmap.count))
            }
        case let .growingFile(folder, path, _, size, offset, chunks):
            try TextRule.folderID.check(folder, "folder id")
            try TextRule.entryPath.check(path, "growing file path")
            guard chunks.count <= WireLimits.maxGrowingChunks else {
                throw .tooManyEntries(field: "growing file chunks", count: chunks.count, limit: WireLimits.maxGrowingChunks)
            }
            var end = offset
            for chunk in chunks {
                guard chunk.hash.count == 32 else { throw .invalidValue(field: "growing chunk hash length", value: UInt64(chunk.hash.count)) }
                guard chunk.size >= 1, chunk.size <= UInt32(WireLimits.maxChunk) else {
                    throw .invalidValue(field: "growing chunk size", value: UInt64(chunk.size))
                }
                end += UInt64(chunk.size)
            }
            guard end <= size else { throw .invalidValue(field: "growing chunks end", value: end) }
        case let .message(_, body):
            guard body.count <= WireLimits.maxMessageBody else {
                throw .fieldTooLong(field: "message body", length: body.count, limit: WireLimits.maxMessageBody)
            }
        case let .close(_, reason), let .streamReset(_, reason):
            try TextRule.closeReason.check(reason, "close reason")
        case let .streamOpen(_, name):
            try TextRule.streamName.check(name, "stream name")
        case let .streamData(_, bytes):
            guard bytes.count <= WireLimits.maxStreamData else {
                throw .fieldTooLong(field: "stream data", length: bytes.count, limit: WireLimits.maxStreamData)
            }
        }
    }
}

extension Frame: CustomStringConvertible {
    /// A short description that gives sizes rather than contents (bodies can be 64 KiB).
    package var description: String {
        switch self {
        case let .ping(nonce): "ping(\(nonce))"
        case let .pong(nonce): "pong(\(nonce))"
        case let .message(id, body): "message(id: \(id), \(body.count) bytes)"
        case let .pairing(status): "pairing(\(status))"
        case let .certificate(der): "certificate(\(der.count) bytes)"
        case let .close(code, reason): "close(\(code), reason: \(reason.utf8.count) bytes)"
        case let .streamOpen(id, name): "streamOpen(id: \(id), name: \(name.utf8.count) bytes)"
        case let .streamData(id, bytes): "streamData(id: \(id), \(bytes.count) bytes)"
        case let .streamClose(id): "streamClose(id: \(id))"
        case let .streamCredit(id, bytes): "streamCredit(id: \(id), \(bytes) bytes)"
        case let .streamReset(id, reason): "streamReset(id: \(id), reason: \(reason.utf8.count) bytes)"
        case let .offer(offer): "offer(\(offer.id), \(offer.entries.count) entries)"
        case let .accept(id, have): "accept(\(id), have: \(have.count) bytes)"
        case let .decline(id, _): "decline(\(id))"
        case let .cancel(id, _): "cancel(\(id))"
        case let .done(id, ok, _): "done(\(id), ok: \(ok))"
        case let .resent(id, bytes): "resent(\(id), \(bytes) bytes)"
        case let .chunk(id, index, data): "chunk(\(id), #\(index), \(data.count) bytes)"
        case let .chunkAck(id, index, ok): "chunkAck(\(id), #\(index), ok: \(ok))"
        case let .hashedChunk(id, index, _, data): "hashedChunk(\(id), #\(index), \(data.count) bytes)"
        case let .shareOffer(folder, _): "shareOffer(\(folder))"
        case let .shareAnswer(folder, accepted, _): "shareAnswer(\(folder), accepted: \(accepted))"
        case let .indexUpdate(folder, full, entries): "indexUpdate(\(folder), full: \(full), \(entries.count) entries)"
        case let .indexAck(folder, sequence): "indexAck(\(folder), \(sequence))"
        case let .blockRequest(request, _, _, offset, size, _): "blockRequest(#\(request), \(size) bytes at \(offset))"
        case let .blockDeltaRequest(request, _, _, offset, size, _, sums):
            "blockDeltaRequest(#\(request), \(size) bytes at \(offset), \(sums.count / WireLimits.deltaSumSize) sums)"
        case let .blockResponse(request, ok, data): "blockResponse(#\(request), ok: \(ok), \(data.count) bytes)"
        case let .indexBlocks(folder, blocks): "indexBlocks(\(folder), \(blocks.count) blocks)"
        case let .versionRequest(request, folder, _, tree, _, version): "versionRequest(#\(request), \(folder), tree: \(tree), version: \(version))"
        case let .versionResponse(request, ok, data): "versionResponse(#\(request), ok: \(ok), \(data.count) bytes)"
        case let .folderSelection(folder, paths): "folderSelection(\(folder), \(paths.count) paths)"
        case let .chunkHave(folder, _, _, count, bitmap): "chunkHave(\(folder), \(count) chunks, \(bitmap.count) bytes)"
        case let .growingFile(folder, _, scan, _, offset, chunks): "growingFile(\(folder), scan \(scan), \(chunks.count) chunks at \(offset))"
        }
    }
}
