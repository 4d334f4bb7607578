#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerFiles
internal import PeerNet

/// Receives one file offered over an open wormhole into a folder: the name is checked (one
/// component, no control characters), the size against the free space, the bytes against
/// the offer; the file appears under its name (or `name (1).ext`) only when complete.
package struct WormholeFileReceiver {
    let session: WormholeSession
    let offer: [String: Any]
    let senderTransit: [String: Any]?
    let directory: String
    let relays: [TransitHints.Address]
    let report: WormholeTransferReport

    package init(session: WormholeSession, offer: [String: Any], senderTransit: [String: Any]?, directory: String,
                relays: [TransitHints.Address], report: WormholeTransferReport) {
        self.session = session
        self.offer = offer
        self.senderTransit = senderTransit
        self.directory = directory
        self.relays = relays
        self.report = report
    }

    /// A safe single-component name, or nil.
    static func safeName(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 255, name != ".", name != "..", !name.contains("/"),
              !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        return name
    }

    /// Receives the offered file or folder; returns the path it was put at.
    @discardableResult
    package func run() throws(WormholeError) -> String {
        if let file = offer["file"] as? [String: Any] {
            let (name, size) = try checkedOffer(name: file["filename"], size: file["filesize"], unpacked: nil)
            if let resume = try resumeOffer(file, name: name, size: size) { return try receiveResumable(resume, name: name, size: size, folder: nil) }
            let (partial, digest, connection) = try receiveBytes(name: name, size: size)
            defer { connection.close(); unlink(partial) }
            let final = try place(partial, name: name)
            try acknowledge(connection, digest: digest)
            return final
        }
        if let folder = offer["directory"] as? [String: Any] {
            guard folder["mode"] as? String == "zipfile/deflated" else {
                try? session.send(["error": "unknown folder mode"])
                throw .protocolViolation("the folder comes in an unknown mode")
            }
            let (name, size) = try checkedOffer(name: folder["dirname"], size: folder["zipsize"], unpacked: folder["numbytes"])
            let unpacked = Int64((folder["numbytes"] as? Int) ?? 0)
            if let resume = try resumeOffer(folder, name: name, size: size) { return try receiveResumable(resume, name: name, size: size, folder: unpacked) }
            let (partial, digest, connection) = try receiveBytes(name: name, size: size)
            defer { connection.close(); unlink(partial) }
            let final = try unpack(zip: partial, name: name, unpacked: unpacked)
            try acknowledge(connection, digest: digest)
            return final
        }
        try? session.send(["error": "syncpeer cannot receive this kind of offer"])
        throw .transfer("the sender offers something unknown")
    }

    /// Checks the offered name and sizes (against the free space); answers with an error
    /// message when they are refused.
    private func checkedOffer(name rawName: Any?, size rawSize: Any?, unpacked: Any?) throws(WormholeError) -> (String, Int64) {
        guard let rawName = rawName as? String, let name = Self.safeName(rawName) else {
            try? session.send(["error": "unsafe name"])
            throw .protocolViolation("the offered name is unsafe")
        }
        guard let size = (rawSize as? Int).map(Int64.init), size >= 0, unpacked == nil || ((unpacked as? Int) ?? -1) >= 0 else {
            try? session.send(["error": "bad size"])
            throw .protocolViolation("the offered size is not a number")
        }
        let needed = UInt64(size) + UInt64((unpacked as? Int) ?? 0)
        var fs = statvfs()
        if statvfs(directory, &fs) == 0, needed > UInt64(fs.f_bavail) * UInt64(fs.f_frsize) {
            try? session.send(["error": "not enough free space"])
            throw .transfer("not enough free space in \(directory) for \(needed) bytes")
        }
        return (name, size)
    }

    /// Unpacks the zip at `zip` (at most `unpacked` bytes) beside the target and renames the
    /// folder into place; returns its path.
    func unpack(zip: String, name: String, unpacked: Int64) throws(WormholeError) -> String {
        let staging = PathName.appending(directory, ".\(name.prefix(200)).wormhole-dir-\(hex(secureRandomBytes(4)))")
        let files = try SafeUnzipper(zipPath: zip, maxTotal: unpacked).unpack(into: staging)
        report.note("Unpacked \(files) file\(files == 1 ? "" : "s")")
        do { return try placeFolder(staging, name: name) } catch {
            try? FileManager.default.removeItem(atPath: staging)
            throw error
        }
    }

    /// Accepts the offer, connects Transit and receives exactly `size` bytes into a hidden
    /// file in the folder; returns its path (the caller removes it), the bytes' SHA-256 and
    /// the connection.
    private func receiveBytes(name: String, size: Int64) throws(WormholeError) -> (String, String, TransitConnection) {
        let connection = try accept(name: name, resumable: false)
        let partial = PathName.appending(directory, ".\(name.prefix(200)).wormhole-\(hex(secureRandomBytes(4)))")
        let fd = Glibc.open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            connection.close()
            throw .transfer("cannot create a file in \(directory): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(fd) }
        do throws(WormholeError) {
            var hasher = SHA256.Hasher()
            var received: Int64 = 0
            report.progress(0, size)
            while received < size {
                let record = try connection.receive(deadline: ContinuousClock.now + .seconds(120))
                guard Int64(record.count) <= size - received else { throw WormholeError.protocolViolation("the sender sent more than the \(size) bytes it offered") }
                hasher.update(record)
                let written = record.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                guard written == record.count else { throw WormholeError.transfer("writing \(partial): \(String(cString: strerror(errno)))") }
                received += Int64(record.count)
                report.progress(received, size)
            }
            guard fsync(fd) == 0 else { throw WormholeError.transfer("saving \(partial): \(String(cString: strerror(errno)))") }
            return (partial, hex(hasher.finalize()), connection)
        } catch {
            connection.close()
            unlink(partial)
            throw error
        }
    }

    /// Answers the offer (`resumable`: in `resume-v1`) and connects Transit.
    func accept(name: String, resumable: Bool) throws(WormholeError) -> TransitConnection {
        let connector = TransitConnector(key: session.deriveKey(purpose: WormholeSession.fileTransferAppID + "/transit-key"), isSender: false, relays: relays)
        try session.send(["transit": connector.ourHints.message])
        try session.send(["answer": resumable ? ["file_ack": "ok", WormholeResume.field: "ok"] : ["file_ack": "ok"]])
        let connection = try connector.connect(peer: TransitHints(message: senderTransit ?? [:]))
        session.onAbandon { connection.close() }
        report.note("Receiving \(name) (\(connection.description))")
        return connection
    }

    /// Tells the sender the bytes arrived, with their SHA-256.
    private func acknowledge(_ connection: TransitConnection, digest: String) throws(WormholeError) {
        try connection.send(JSONValue.bytes(of: ["ack": "ok", "sha256": digest])!)
    }

    /// Renames the unpacked folder to `name`, or `name (n)` when taken.
    private func placeFolder(_ staging: String, name: String) throws(WormholeError) -> String {
        for n in 0..<1000 {
            let path = PathName.appending(directory, n == 0 ? name : "\(name) (\(n))")
            var info = stat()
            if lstat(path, &info) == 0 { continue }
            if rename(staging, path) == 0 { return path }
            throw .transfer("cannot place \(path): \(String(cString: strerror(errno)))")
        }
        throw .transfer("too many folders named like \(name) in \(directory)")
    }

    /// Links the finished file under `name`, or `name (n).ext` when taken; never overwrites.
    private func place(_ partial: String, name: String) throws(WormholeError) -> String {
        let base = PathName.deletingPathExtension(name), ext = PathName.pathExtension(name)
        for n in 0..<1000 {
            let candidate = n == 0 ? name : "\(base) (\(n))" + (ext.isEmpty ? "" : ".\(ext)")
            let path = PathName.appending(directory, candidate)
            if link(partial, path) == 0 {
                unlink(partial)
                return path
            }
            guard errno == EEXIST else { throw .transfer("cannot place \(path): \(String(cString: strerror(errno)))") }
        }
        throw .transfer("too many files named like \(name) in \(directory)")
    }
}
