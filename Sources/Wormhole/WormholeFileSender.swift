#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerNet

/// Sends one file, or a folder as a zip, over an open wormhole (magic-wormhole
/// docs/file-transfer-protocol.md):
/// our `transit` hints, the `offer`, their hints and `answer`, the bytes in Transit records,
/// and their `{"ack": "ok", "sha256": …}` record, checked against what we sent.
package struct WormholeFileSender: Sendable {
    static let recordSize = 256 * 1024
    let session: WormholeSession
    let path: String
    let relays: [TransitHints.Address]
    let report: WormholeTransferReport

    package init(session: WormholeSession, path: String, relays: [TransitHints.Address], report: WormholeTransferReport) {
        self.session = session
        self.path = path
        self.relays = relays
        self.report = report
    }

    package func run() throws(WormholeError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .transfer("cannot read \(path)") }
        let name = PathName.lastComponent(path)
        if info.st_mode & S_IFMT == S_IFDIR {
            let zipPath = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-wormhole-\(hex(secureRandomBytes(6))).zip").path
            defer { unlink(zipPath) }
            let summary = try FolderZipper.zip(folder: path, to: zipPath)
            if summary.skipped > 0 { report.note("Left out \(summary.skipped) link\(summary.skipped == 1 ? "" : "s") or special file\(summary.skipped == 1 ? "" : "s")") }
            var zipInfo = stat()
            guard stat(zipPath, &zipInfo) == 0 else { throw .transfer("the temporary zip vanished") }
            try send(file: zipPath, name: name, offer: ["directory": ["mode": "zipfile/deflated", "dirname": name, "zipsize": Int64(zipInfo.st_size),
                                                                      "numbytes": summary.bytes, "numfiles": summary.files]])
            return
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .transfer("\(path) is not a file or a folder") }
        try send(file: path, name: name, offer: ["file": ["filename": name, "filesize": Int64(info.st_size)]])
    }

    /// Offers `offer`, then sends the bytes of `file` once the other side accepts: chunked and
    /// resumable (`WormholeResume`) when the other side is a syncpeer that can, else whole.
    private func send(file: String, name: String, offer: [String: Any]) throws(WormholeError) {
        guard let handle = PlainFile.reading(file) else { throw .transfer("cannot read \(file)") }
        defer { handle.close() }
        var info = stat()
        guard fstat(handle.fileDescriptor, &info) == 0 else { throw .transfer("cannot read \(file)") }
        let size = Int64(info.st_size)
        var offer = offer
        var manifest: Manifest?
        if session.peerAbilities.contains(WormholeResume.ability) { manifest = try WormholeResume.manifest(of: file, size: size) }
        if let manifest, let kind = offer.keys.first, var fields = offer[kind] as? [String: Any] {
            fields[WormholeResume.field] = WormholeResume.Offer(root: manifest.rootHash, chunks: manifest.chunks.count).field
            offer[kind] = fields
        }
        let connector = TransitConnector(key: session.deriveKey(purpose: WormholeSession.fileTransferAppID + "/transit-key"), isSender: true, relays: relays)
        try session.send(["transit": connector.ourHints.message])
        try session.send(["offer": offer])
        var peerHints: TransitHints?
        var resumable = false
        while true {
            let message = try session.receive()
            if let transit = message["transit"] as? [String: Any] { peerHints = TransitHints(message: transit) }
            guard let answer = message["answer"] as? [String: Any] else { continue }
            guard answer["file_ack"] as? String == "ok" else { throw .remote("the offer was not accepted") }
            resumable = manifest != nil && answer[WormholeResume.field] as? String == "ok"
            break
        }
        let connection = try connector.connect(peer: peerHints ?? TransitHints())
        session.onAbandon { connection.close() }
        defer { connection.close() }
        report.note("Sending \(name) (\(connection.description))")
        if resumable, let manifest {
            do { try ResumableSend(connection: connection, path: file, manifest: manifest, report: report).run() } catch {
                report.note("The receiver keeps the chunks that arrived: send again with a new code to continue from them")
                throw error
            }
            return
        }
        var hasher = SHA256.Hasher()
        var sent: Int64 = 0
        report.progress(0, size)
        while sent < size {
            let chunk: [UInt8]
            do { chunk = try handle.read(upToCount: Int(min(Int64(Self.recordSize), size - sent))) } catch {
                throw .transfer("reading \(file): \(error)")
            }
            guard !chunk.isEmpty else { throw .transfer("\(file) shrank while it was sent") }
            let bytes = chunk
            hasher.update(bytes)
            try connection.send(bytes)
            sent += Int64(bytes.count)
            report.progress(sent, size)
        }
        let ack = try connection.receive(deadline: ContinuousClock.now + .seconds(120))
        guard let object = JSONValue.object(parsing: ack), object["ack"] as? String == "ok" else {
            throw .remote("the receiver did not confirm the transfer")
        }
        if let theirHash = object["sha256"] as? String, theirHash != hex(hasher.finalize()) {
            throw .transfer("the receiver's SHA-256 differs from what was sent")
        }
    }
}
