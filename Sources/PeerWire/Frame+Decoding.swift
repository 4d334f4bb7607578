extension ByteReader {
    mutating func transferID() throws(WireError) -> TransferID {
        try TransferID(try bytes(TransferID.byteCount, "transfer id"))
    }

    /// A u16 count (at most `limit`) of items that each take at least 3 bytes (a u16 length
    /// and one byte), then the items: a count the body cannot hold is refused before any
    /// item is read or room is reserved for it.
    mutating func u16List<Item>(_ countField: String, _ field: String, limit: Int,
                                _ item: (inout ByteReader) throws(WireError) -> Item) throws(WireError) -> [Item] {
        let count = Int(try u16(countField))
        guard count <= limit else { throw .tooManyEntries(field: field, count: count, limit: limit) }
        guard count * 3 <= remaining else { throw .truncated(field: field) }
        var items: [Item] = []
        items.reserveCapacity(count)
        for _ in 0..<count { items.append(try item(&self)) }
        return items
    }

    /// A u8 that must be 0 or 1.
    mutating func flag(_ field: String) throws(WireError) -> Bool {
        let raw = try u8(field)
        guard raw <= 1 else { throw .invalidValue(field: field, value: UInt64(raw)) }
        return raw == 1
    }
}

extension Frame {
    /// The fields a block request and a block delta request share.
    private static func readBlockRequest(_ reader: inout ByteReader) throws(WireError)
        -> (request: UInt32, folder: String, path: String, offset: UInt64, size: UInt32, hash: [UInt8]) {
        let request = try reader.u32("block request id")
        let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
        let path = try reader.prefixedText(.u16, rule: .entryPath, "block path")
        let offset = try reader.u64("block offset")
        let size = try reader.u32("block size")
        guard size <= UInt32(WireLimits.maxChunk) else { throw .invalidValue(field: "block size", value: UInt64(size)) }
        return (request, folder, path, offset, size, try reader.bytes(32, "block hash"))
    }

    /// Decodes a frame body whose length the caller has already checked against
    /// ``WireLimits/bodyLengthRange(of:)``. Every byte of the body must be used.
    static func decodeBody(type: FrameType, from reader: inout ByteReader) throws(WireError) -> Frame {
        let frame: Frame
        switch type {
        case .ping:
            frame = .ping(try reader.u64("ping nonce"))
        case .pong:
            frame = .pong(try reader.u64("pong nonce"))
        case .close:
            let code = CloseCode(rawValue: try reader.u16("close code"))
            let reason = try reader.prefixedText(.u16, rule: .closeReason, "close reason")
            frame = .close(code: code, reason: reason)
        case .pairing:
            let raw = try reader.u8("pairing status")
            guard let status = PairingStatus(rawValue: raw) else {
                throw .invalidValue(field: "pairing status", value: UInt64(raw))
            }
            frame = .pairing(status)
        case .certificate:
            let der = try reader.prefixedBytes(.u16, limit: WireLimits.maxCertificate, "certificate")
            guard !der.isEmpty else { throw .invalidValue(field: "certificate length", value: 0) }
            frame = .certificate(der)
        case .message:
            let id = try reader.u64("message id")
            let body = try reader.prefixedBytes(.u32, limit: WireLimits.maxMessageBody, "message body")
            frame = .message(id: id, body: body)
        case .streamOpen:
            let id = try reader.u32("stream id")
            let name = try reader.prefixedText(.u8, rule: .streamName, "stream name")
            frame = .streamOpen(id: id, name: name)
        case .streamData:
            let id = try reader.u32("stream id")
            let bytes = try reader.prefixedBytes(.u32, limit: WireLimits.maxStreamData, "stream data")
            frame = .streamData(id: id, bytes: bytes)
        case .streamClose:
            frame = .streamClose(id: try reader.u32("stream id"))
        case .streamCredit:
            let id = try reader.u32("stream id")
            frame = .streamCredit(id: id, bytes: try reader.u32("stream credit"))
        case .streamReset:
            let id = try reader.u32("stream id")
            frame = .streamReset(id: id, reason: try reader.prefixedText(.u16, rule: .closeReason, "stream reset reason"))
        case .offer:
            frame = .offer(try TransferOffer.read(from: &reader))
        case .accept:
            let id = try reader.transferID()
            frame = .accept(id: id, have: try reader.prefixedBytes(.u32, limit: WireLimits.maxHaveBitmap, "have bitmap"))
        case .decline:
            let id = try reader.transferID()
            frame = .decline(id: id, reason: try reader.prefixedText(.u16, rule: .transferReason, "transfer reason"))
        case .cancel:
            let id = try reader.transferID()
            frame = .cancel(id: id, reason: try reader.prefixedText(.u16, rule: .transferReason, "transfer reason"))
        case .done:
            let id = try reader.transferID()
            let ok = try reader.flag("done status")
            frame = .done(id: id, ok: ok, reason: try reader.prefixedText(.u16, rule: .transferReason, "transfer reason"))
        case .resent:
            let id = try reader.transferID()
            frame = .resent(id: id, bytes: try reader.u64("bytes re-sent"))
        case .chunk:
            let id = try reader.transferID()
            let index = try reader.u32("chunk index")
            frame = .chunk(id: id, index: index, data: try reader.prefixedBytes(.u32, limit: WireLimits.maxChunk, "chunk"))
        case .hashedChunk:
            let id = try reader.transferID()
            let index = try reader.u32("chunk index")
            let hash = try reader.bytes(32, "chunk hash")
            frame = .hashedChunk(id: id, index: index, hash: hash, data: try reader.prefixedBytes(.u32, limit: WireLimits.maxChunk, "chunk"))
        case .chunkAck:
            let id = try reader.transferID()
            let index = try reader.u32("chunk index")
            frame = .chunkAck(id: id, index: index, ok: try reader.flag("chunk ack status"))
        case .shareOffer:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            frame = .shareOffer(folder: folder, label: try reader.prefixedText(.u8, rule: .folderLabel, "folder label"))
        case .shareAnswer:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let accepted = try reader.flag("share answer")
            frame = .shareAnswer(folder: folder, accepted: accepted, reason: try reader.prefixedText(.u16, rule: .transferReason, "share reason"))
        case .indexUpdate:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let full = try reader.flag("full index flag")
            let count = Int(try reader.u32("index entry count"))
            guard count <= WireLimits.maxIndexEntries else {
                throw .tooManyEntries(field: "index entries", count: count, limit: WireLimits.maxIndexEntries)
            }
            // Each entry takes at least 44 bytes: refuse counts the body cannot hold.
            guard count * 44 <= reader.remaining else { throw .truncated(field: "index entries") }
            var entries: [SyncFileEntry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count { entries.append(try SyncFileEntry.read(from: &reader)) }
            frame = .indexUpdate(folder: folder, full: full, entries: entries)
        case .indexAck:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            frame = .indexAck(folder: folder, sequence: try reader.u64("index sequence"))
        case .blockRequest:
            let (request, folder, path, offset, size, hash) = try readBlockRequest(&reader)
            frame = .blockRequest(request: request, folder: folder, path: path, offset: offset, size: size, hash: hash)
        case .blockDeltaRequest:
            let (request, folder, path, offset, size, hash) = try readBlockRequest(&reader)
            let count = Int(try reader.u16("block sum count"))
            guard count <= WireLimits.maxDeltaSums else {
                throw .tooManyEntries(field: "block sums", count: count, limit: WireLimits.maxDeltaSums)
            }
            frame = .blockDeltaRequest(request: request, folder: folder, path: path, offset: offset, size: size, hash: hash,
                                       sums: try reader.bytes(count * WireLimits.deltaSumSize, "block sums"))
        case .indexBlocks:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let blocks = try reader.u16List("index block count", "index blocks", limit: WireLimits.maxIndexEntries) {
                reader throws(WireError) in
                let block = try reader.prefixedBytes(.u16, limit: WireLimits.maxIndexBlock, "index block")
                guard !block.isEmpty else { throw .invalidValue(field: "index block length", value: 0) }
                return block
            }
            frame = .indexBlocks(folder: folder, blocks: blocks)
        case .versionRequest:
            let request = try reader.u32("version request id")
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let path = try reader.prefixedText(.u16, rule: .entryPath, "version path")
            frame = .versionRequest(request: request, folder: folder, path: path, tree: try reader.flag("version tree flag"),
                                    before: try reader.u64("versions before"), version: try reader.u64("version id"))
        case .versionResponse:
            let request = try reader.u32("version request id")
            let ok = try reader.flag("version response status")
            frame = .versionResponse(request: request, ok: ok,
                                     data: try reader.prefixedBytes(.u32, limit: WireLimits.maxVersionResponse, "version page"))
        case .folderSelection:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let paths = try reader.u16List("selected path count", "selected paths", limit: WireLimits.maxSelectionPaths) {
                reader throws(WireError) in try reader.prefixedText(.u16, rule: .entryPath, "selected path")
            }
            frame = .folderSelection(folder: folder, paths: paths)
        case .chunkHave:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let path = try reader.prefixedText(.u16, rule: .entryPath, "held file path")
            let root = try reader.bytes(32, "held file root")
            let count = try reader.u32("held file chunk count")
            guard count >= 1, count <= UInt32(WireLimits.maxHeldChunks) else {
                throw .invalidValue(field: "held file chunk count", value: UInt64(count))
            }
            frame = .chunkHave(folder: folder, path: path, root: root, count: count,
                               bitmap: try reader.bytes(WireLimits.heldBitmapSize(count), "held chunks bitmap"))
        case .growingFile:
            let folder = try reader.prefixedText(.u8, rule: .folderID, "folder id")
            let path = try reader.prefixedText(.u16, rule: .entryPath, "growing file path")
            let scan = try reader.u64("growing file scan")
            let size = try reader.u64("growing file size")
            let offset = try reader.u64("growing chunks offset")
            let count = Int(try reader.u16("growing chunk count"))
            guard count <= WireLimits.maxGrowingChunks else {
                throw .tooManyEntries(field: "growing file chunks", count: count, limit: WireLimits.maxGrowingChunks)
            }
            var chunks: [GrowingChunk] = []
            chunks.reserveCapacity(count)
            var end = offset
            for _ in 0..<count {
                let size = try reader.u32("growing chunk size")
                guard size >= 1, size <= UInt32(WireLimits.maxChunk) else { throw .invalidValue(field: "growing chunk size", value: UInt64(size)) }
                chunks.append(GrowingChunk(size: size, hash: try reader.bytes(32, "growing chunk hash")))
                end += UInt64(size)
            }
            guard end <= size else { throw .invalidValue(field: "growing chunks end", value: end) }
            frame = .growingFile(folder: folder, path: path, scan: scan, size: size, offset: offset, chunks: chunks)
        case .blockResponse:
            let request = try reader.u32("block request id")
            let ok = try reader.flag("block response status")
            frame = .blockResponse(request: request, ok: ok, data: try reader.prefixedBytes(.u32, limit: WireLimits.maxChunk, "block data"))
        }
        try reader.expectEnd(after: "\(type) frame body")
        return frame
    }
}
