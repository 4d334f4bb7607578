/// Encodes frames into the frame stream (header + body; see ``Frame`` for the layout).
package enum FrameEncoder {
    /// The encoded frame.
    ///
    /// - Precondition: `frame` is valid (``Frame/validate()`` does not throw). Frames from a
    ///   ``FrameReader`` always are; validate frames built from local input first.
    package static func encode(_ frame: Frame) -> [UInt8] {
        var bytes: [UInt8] = []
        append(frame, to: &bytes)
        return bytes
    }

    /// Appends the encoded frame to `buffer`, so that many frames can share one buffer that is
    /// then cut into Noise plaintexts.
    ///
    /// - Precondition: `frame` is valid (``Frame/validate()`` does not throw).
    package static func append(_ frame: Frame, to buffer: inout [UInt8]) {
        do {
            try frame.validate()
        } catch {
            preconditionFailure("FrameEncoder: invalid \(frame.type) frame: \(error)")
        }
        var writer = ByteWriter()
        swap(&writer.bytes, &buffer)
        defer { swap(&writer.bytes, &buffer) }

        let headerOffset = writer.bytes.count
        writer.u8(frame.type.rawValue)
        writer.u32(0)  // body length, patched below
        writeBody(of: frame, to: &writer)
        let bodyLength = writer.bytes.count - headerOffset - WireLimits.frameHeaderSize
        assert(WireLimits.bodyLengthRange(of: frame.type).contains(bodyLength))
        writer.patchU32(UInt32(bodyLength), at: headerOffset + 1)
    }

    /// The bytes of the frame `.chunk(id, index, data)` that come before `data` (header,
    /// id, index, data length) for a chunk of `count` bytes: a sender can then stream the
    /// data after them without building the frame. `count` must be at most
    /// ``WireLimits/maxChunk``.
    package static func chunkPrefix(id: TransferID, index: UInt32, count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= WireLimits.maxChunk, "FrameEncoder: chunk of \(count) bytes")
        var writer = ByteWriter()
        writer.u8(FrameType.chunk.rawValue)
        writer.u32(UInt32(id.bytes.count + 8 + count))
        writer.raw(id.bytes)
        writer.u32(index)
        writer.length(count, .u32)
        return writer.bytes
    }

    /// The bytes of the frame `.hashedChunk(id, index, hash, data)` before `data`, as
    /// ``chunkPrefix(id:index:count:)`` is for `.chunk`. `hash` must be 32 bytes.
    package static func hashedChunkPrefix(id: TransferID, index: UInt32, hash: [UInt8], count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= WireLimits.maxChunk && hash.count == 32, "FrameEncoder: hashed chunk of \(count) bytes")
        var writer = ByteWriter()
        writer.u8(FrameType.hashedChunk.rawValue)
        writer.u32(UInt32(id.bytes.count + 8 + hash.count + count))
        writer.raw(id.bytes)
        writer.u32(index)
        writer.raw(hash)
        writer.length(count, .u32)
        return writer.bytes
    }

    /// The bytes of a successful ``Frame/blockResponse(request:ok:data:)`` of `count` data
    /// bytes that come before the data: the same frame written without the data in memory.
    package static func blockResponsePrefix(request: UInt32, count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= WireLimits.maxChunk, "FrameEncoder: block of \(count) bytes")
        var writer = ByteWriter()
        writer.u8(FrameType.blockResponse.rawValue)
        writer.u32(UInt32(4 + 1 + 4 + count))
        writer.u32(request)
        writer.u8(1)
        writer.length(count, .u32)
        return writer.bytes
    }

    /// The length of the frame's body as `append` writes it (encoding it: for the frames
    /// whose size is not bounded by their fields alone).
    static func bodyLength(of frame: Frame) -> Int {
        var writer = ByteWriter()
        writeBody(of: frame, to: &writer)
        return writer.bytes.count
    }

    /// The fields a block request and a block delta request share.
    private static func writeBlockRequest(_ request: UInt32, _ folder: String, _ path: String, _ offset: UInt64, _ size: UInt32,
                                          _ hash: [UInt8], to writer: inout ByteWriter) {
        writer.u32(request)
        writer.prefixedText(folder, .u8)
        writer.prefixedText(path, .u16)
        writer.u64(offset)
        writer.u32(size)
        writer.raw(hash)
    }

    private static func writeBody(of frame: Frame, to writer: inout ByteWriter) {
        switch frame {
        case let .ping(nonce), let .pong(nonce):
            writer.u64(nonce)
        case let .message(id, body):
            writer.u64(id)
            writer.prefixedBytes(body, .u32)
        case let .pairing(status):
            writer.u8(status.rawValue)
        case let .certificate(der):
            writer.prefixedBytes(der, .u16)
        case let .close(code, reason):
            writer.u16(code.rawValue)
            writer.prefixedText(reason, .u16)
        case let .streamOpen(id, name):
            writer.u32(id)
            writer.prefixedText(name, .u8)
        case let .streamData(id, bytes):
            writer.u32(id)
            writer.prefixedBytes(bytes, .u32)
        case let .streamClose(id):
            writer.u32(id)
        case let .streamCredit(id, bytes):
            writer.u32(id)
            writer.u32(bytes)
        case let .streamReset(id, reason):
            writer.u32(id)
            writer.prefixedText(reason, .u16)
        case let .offer(offer):
            offer.write(to: &writer)
        case let .accept(id, have):
            writer.raw(id.bytes)
            writer.prefixedBytes(have, .u32)
        case let .decline(id, reason), let .cancel(id, reason):
            writer.raw(id.bytes)
            writer.prefixedText(reason, .u16)
        case let .done(id, ok, reason):
            writer.raw(id.bytes)
            writer.u8(ok ? 1 : 0)
            writer.prefixedText(reason, .u16)
        case let .resent(id, bytes):
            writer.raw(id.bytes)
            writer.u64(bytes)
        case let .chunk(id, index, data):
            writer.raw(id.bytes)
            writer.u32(index)
            writer.prefixedBytes(data, .u32)
        case let .hashedChunk(id, index, hash, data):
            writer.raw(id.bytes)
            writer.u32(index)
            writer.raw(hash)
            writer.prefixedBytes(data, .u32)
        case let .chunkAck(id, index, ok):
            writer.raw(id.bytes)
            writer.u32(index)
            writer.u8(ok ? 1 : 0)
        case let .shareOffer(folder, label):
            writer.prefixedText(folder, .u8)
            writer.prefixedText(label, .u8)
        case let .shareAnswer(folder, accepted, reason):
            writer.prefixedText(folder, .u8)
            writer.u8(accepted ? 1 : 0)
            writer.prefixedText(reason, .u16)
        case let .indexUpdate(folder, full, entries):
            writer.prefixedText(folder, .u8)
            writer.u8(full ? 1 : 0)
            writer.u32(UInt32(entries.count))
            for entry in entries { entry.write(to: &writer) }
        case let .indexAck(folder, sequence):
            writer.prefixedText(folder, .u8)
            writer.u64(sequence)
        case let .blockRequest(request, folder, path, offset, size, hash):
            writeBlockRequest(request, folder, path, offset, size, hash, to: &writer)
        case let .blockDeltaRequest(request, folder, path, offset, size, hash, sums):
            writeBlockRequest(request, folder, path, offset, size, hash, to: &writer)
            writer.u16(UInt16(sums.count / WireLimits.deltaSumSize))
            writer.raw(sums)
        case let .blockResponse(request, ok, data):
            writer.u32(request)
            writer.u8(ok ? 1 : 0)
            writer.prefixedBytes(data, .u32)
        case let .versionRequest(request, folder, path, tree, before, version):
            writer.u32(request)
            writer.prefixedText(folder, .u8)
            writer.prefixedText(path, .u16)
            writer.u8(tree ? 1 : 0)
            writer.u64(before)
            writer.u64(version)
        case let .versionResponse(request, ok, data):
            writer.u32(request)
            writer.u8(ok ? 1 : 0)
            writer.prefixedBytes(data, .u32)
        case let .indexBlocks(folder, blocks):
            writer.prefixedText(folder, .u8)
            writer.u16(UInt16(blocks.count))
            for block in blocks { writer.prefixedBytes(block, .u16) }
        case let .folderSelection(folder, paths):
            writer.prefixedText(folder, .u8)
            writer.u16(UInt16(paths.count))
            for path in paths { writer.prefixedText(path, .u16) }
        case let .chunkHave(folder, path, root, count, bitmap):
            writer.prefixedText(folder, .u8)
            writer.prefixedText(path, .u16)
            writer.raw(root)
            writer.u32(count)
            writer.raw(bitmap)
        case let .growingFile(folder, path, scan, size, offset, chunks):
            writer.prefixedText(folder, .u8)
            writer.prefixedText(path, .u16)
            writer.u64(scan)
            writer.u64(size)
            writer.u64(offset)
            writer.u16(UInt16(chunks.count))
            for chunk in chunks {
                writer.u32(chunk.size)
                writer.raw(chunk.hash)
            }
        }
    }
}
