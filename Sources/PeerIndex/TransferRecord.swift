/// A resource transfer (one file to or from a peer), as stored in the `transfers` table.
package struct TransferRecord: Sendable, Equatable {
    package enum Direction: String, Sendable, CaseIterable {
        case send
        case receive
    }

    package enum State: String, Sendable, CaseIterable {
        /// Offered, not accepted yet.
        case offered
        /// Chunks are moving.
        case active
        /// Stopped, resumable (peer lost, process stopped, user paused).
        case paused
        /// Root hash checked and the file is in place (receive) or acknowledged (send).
        case completed
        /// Gave up; `error` says why.
        case failed
        /// Cancelled by either side.
        case cancelled

        /// Whether the transfer can still continue (resume looks for these).
        package var isUnfinished: Bool { self == .offered || self == .active || self == .paused }
    }

    /// The root hash of a transfer whose manifest streams, until every chunk is known:
    /// 32 zero bytes (no content is looked up by it).
    package static let unknownRootHash = [UInt8](repeating: 0, count: 32)

    /// Transfer ID chosen by the sender.
    package var id: String
    package var direction: Direction
    /// The other end's device ID; it must be a known peer.
    package var deviceID: String
    /// File name as offered.
    package var name: String
    package var size: Int64
    /// POSIX permission bits.
    package var mode: UInt32
    /// Modification time, unix nanoseconds.
    package var mtimeNs: Int64
    /// Root hash of the manifest (32 bytes); `unknownRootHash` while a streamed manifest is
    /// incomplete.
    package var rootHash: [UInt8]
    package var chunkCount: Int
    package var state: State
    /// Receive: the partial file chunks are written to.
    package var partialPath: String?
    /// Receive: destination after the final rename. Send: the source file.
    package var finalPath: String?
    /// Bytes in verified chunks; maintained by `markChunksVerified`.
    package var bytesDone: Int64
    /// Last error (one line) when `state` is `.failed`.
    package var error: String?
    /// Unix ms.
    package var createdAt: Int64
    /// Unix ms; set by the index on every change.
    package var updatedAt: Int64

    package init(
        id: String, direction: Direction, deviceID: String, name: String, size: Int64, mode: UInt32,
        mtimeNs: Int64, rootHash: [UInt8], chunkCount: Int, state: State = .offered,
        partialPath: String? = nil, finalPath: String? = nil, bytesDone: Int64 = 0, error: String? = nil,
        createdAt: Int64, updatedAt: Int64? = nil
    ) {
        self.id = id
        self.direction = direction
        self.deviceID = deviceID
        self.name = name
        self.size = size
        self.mode = mode
        self.mtimeNs = mtimeNs
        self.rootHash = rootHash
        self.chunkCount = chunkCount
        self.state = state
        self.partialPath = partialPath
        self.finalPath = finalPath
        self.bytesDone = bytesDone
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }
}

/// One chunk of a transfer's manifest.
package struct TransferChunk: Sendable, Equatable {
    /// Position in the manifest, from 0.
    package var index: Int
    /// Byte offset in the file.
    package var offset: Int64
    /// Length in bytes (> 0).
    package var size: Int64
    /// The content hash of the chunk (BLAKE3 since protocol version 4, 32 bytes).
    package var hash: [UInt8]
    /// Received, hash checked and written (receive side).
    package var verified: Bool

    package init(index: Int, offset: Int64, size: Int64, hash: [UInt8], verified: Bool = false) {
        self.index = index
        self.offset = offset
        self.size = size
        self.hash = hash
        self.verified = verified
    }
}
