internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerNet

/// `resume-v1`: between two syncpeers (both list it in their version message's
/// `app_versions.syncpeer.abilities`), a file or a folder's zip crosses as content-defined
/// chunks, each verified before it is placed, and a cut transfer sent again with a new code
/// continues from the chunks the receiver holds. A plain Magic Wormhole peer never sees any
/// of it: the sender adds the `syncpeer_resume` field to its offer only when the receiver
/// listed the ability, and the receiver answers in kind.
///
///     mailbox   sender   → {"offer": {"file": …, "syncpeer_resume": {"root": HEX, "chunks": N}}}
///               receiver → {"answer": {"file_ack": "ok", "syncpeer_resume": "ok"}}
///     transit   sender   → the manifest (PeerFiles' encoding, 48 + 36 × N bytes) in records
///               receiver → the chunks it holds: one record, ⌈N/8⌉ bytes, bit i = byte i/8, 1 << i%8
///               sender   → each missing chunk, in order, in records of at most `pieceSize`
///               receiver → {"ack": "ok", "root": HEX} once the file (or folder) is in place
///
/// The receiver keeps what it verified in `<folder>/.syncpeer-partial/wormhole-ROOT.part`
/// (at most `maxKeptPartials` there), so the root of the sender's manifest finds it again.
package enum WormholeResume {
    package static let ability = "resume-v1"
    /// The field in the offer (the manifest's root and chunk count) and in the answer ("ok").
    static let field = "syncpeer_resume"
    /// Largest Transit record of manifest or chunk bytes the sender makes.
    static let pieceSize = 256 * 1024
    /// Wormhole partial files kept in one folder's staging directory; the oldest go first.
    static let maxKeptPartials = 4
    /// Waiting for the other side between the steps (the receiver re-hashes its partial file
    /// before it answers; a large one takes a while).
    static let stepTimeout: Duration = .seconds(300)

    /// What the offer says of the manifest to come.
    struct Offer: Equatable {
        let root: [UInt8]
        let chunks: Int

        var rootHex: String { hex(root) }
        /// The manifest's encoded length (`Manifest.encode`: 48 + 36 bytes a chunk).
        var manifestLength: Int { 48 + 36 * chunks }

        init(root: [UInt8], chunks: Int) {
            self.root = root
            self.chunks = chunks
        }

        /// The offer's `syncpeer_resume` field for a file of `size` bytes: nil when there is
        /// none (a plain transfer); refused when malformed or when it counts more chunks than
        /// the chunker can cut from that size.
        init?(field: Any?, size: Int64) throws(WormholeError) {
            guard let field else { return nil }
            guard let object = field as? [String: Any], let text = object["root"] as? String, text.utf8.count == 64,
                  let root = bytes(fromHex: text), let chunks = object["chunks"] as? Int
            else { throw .protocolViolation("a malformed resume offer") }
            guard chunks >= 0, chunks <= WormholeResume.maxChunks(fileSize: UInt64(max(0, size))) else {
                throw .protocolViolation("a resume offer of \(chunks) chunks for \(size) bytes")
            }
            self.init(root: root, chunks: chunks)
        }

        var field: [String: Any] { ["root": rootHex, "chunks": chunks] }
    }

    /// The most chunks FastCDC cuts from `fileSize` bytes with `ChunkParameters.forFileSize`
    /// (every chunk but the last is longer than `minSize`), and never over `Manifest.maxChunks`.
    static func maxChunks(fileSize: UInt64) -> Int {
        guard fileSize > 0 else { return 0 }
        let step = UInt64(ChunkParameters.forFileSize(fileSize).minSize + 1)
        return Int(min(UInt64(Manifest.maxChunks), (fileSize - 1) / step + 1))
    }

    /// The receiver's record of the chunks it holds.
    static func bitmap(holding held: some Sequence<Int>, count: Int) -> [UInt8] {
        var bits = [UInt8](repeating: 0, count: (count + 7) / 8)
        for index in held where index >= 0 && index < count { bits[index / 8] |= 1 << UInt8(index % 8) }
        return bits
    }

    /// The indices of the chunks a bitmap says are missing; refused unless it is exactly
    /// ⌈count/8⌉ bytes with no bit set past `count`.
    static func missing(bitmap: [UInt8], count: Int) throws(WormholeError) -> [Int] {
        guard bitmap.count == (count + 7) / 8 else {
            throw .protocolViolation("a record of held chunks of \(bitmap.count) bytes for \(count) chunks")
        }
        if count % 8 != 0, let last = bitmap.last, last >> UInt8(count % 8) != 0 {
            throw .protocolViolation("a record of held chunks names chunks past the last")
        }
        return (0..<count).filter { bitmap[$0 / 8] & (1 << UInt8($0 % 8)) == 0 }
    }

    /// The manifest of the file at `path`, which must still be `size` bytes.
    static func manifest(of path: String, size: Int64) throws(WormholeError) -> Manifest {
        let manifest: Manifest
        do { manifest = try FileChunker.manifest(ofFileAt: path) } catch { throw .transfer("chunking \(path): \(error)") }
        guard manifest.fileSize == UInt64(size) else { throw .transfer("\(path) changed while it was prepared") }
        return manifest
    }

    /// The final `{"ack": "ok", "root": …}` record.
    static func ack(root: [UInt8]) -> [UInt8] {
        JSONValue.bytes(of: ["ack": "ok", "root": hex(root)])!
    }

    /// Whether `record` is the ack of `root`.
    static func isAck(_ record: [UInt8], root: [UInt8]) -> Bool {
        guard let object = JSONValue.object(parsing: record) else { return false }
        return object["ack"] as? String == "ok" && object["root"] as? String == hex(root)
    }
}
