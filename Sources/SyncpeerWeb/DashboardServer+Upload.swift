internal import FoundationEssentials
internal import Glibc
internal import PeerNet
internal import SyncEngine

/// A file dropped into the page (`POST /upload?name=NAME&peer=PEER`, the bytes as the body):
/// staged in `HOME/uploads/RANDOM/NAME` (folders 0700, the file 0600), then sent from there
/// as the CLI's `send --detach` does. Bounded: `maxUploadBytes` a file, `maxUploads`
/// arriving at once (a request beyond gets the ordinary body limit, and 413), staged files
/// removed after `uploadLifetime`.
extension DashboardServer {
    static let maxUploadBytes = 16 << 20
    static let maxUploads = 2
    static let uploadLifetime: TimeInterval = 7 * 24 * 3600

    /// Whether the request's head so far starts an upload (it may take the larger body limit).
    static func startsUpload(_ buffer: [UInt8]) -> Bool {
        let prefix = Array("POST /upload?".utf8)
        return buffer.count >= prefix.count && Array(buffer.prefix(prefix.count)) == prefix
    }

    func upload(_ request: HTTPRequest) -> JSONValue {
        do throws(EngineError) {
            guard let name = request.query["name"], let peer = request.query["peer"], !peer.isEmpty else {
                throw .invalidArgument("an upload needs ?name=FILE-NAME&peer=PEER")
            }
            try Self.checkUploadName(name)
            let folder = try stagingFolder()
            let path = folder + "/" + name
            try PrivateFile.write(request.body, to: path, replacing: false)
            let client = try ControlClient.connect(home: home)
            let result = try client.request(.send(path: path, peer: peer, name: nil, spool: nil, detach: true))
            return ["ok": true, "result": result]
        } catch {
            return ["ok": false, "error": .string(error.description), "kind": .string(error.kind.rawValue)]
        }
    }

    /// A name from the browser is one path component: no "/", not "." or "..", no NUL, at
    /// most 255 bytes.
    static func checkUploadName(_ name: String) throws(EngineError) {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= 255, name != ".", name != "..", !bytes.contains(0x2F), !bytes.contains(0) else {
            throw .invalidArgument("'\(name)' is not a file name (one name of at most 255 bytes, no '/')")
        }
    }

    /// A new folder of its own under `HOME/uploads` (0700), after the staged files older
    /// than `uploadLifetime` went.
    private func stagingFolder() throws(EngineError) -> String {
        let uploads = home.path + "/uploads"
        if mkdir(uploads, 0o700) != 0 && errno != EEXIST {
            throw .invalidArgument("cannot create \(uploads): \(String(cString: strerror(errno)))")
        }
        let fileManager = FileManager.default
        let cutoff = Date().addingTimeInterval(-Self.uploadLifetime)
        for entry in (try? fileManager.contentsOfDirectory(atPath: uploads)) ?? [] {
            let path = uploads + "/" + entry
            if let modified = (try? fileManager.attributesOfItem(atPath: path))?[.modificationDate] as? Date, modified < cutoff {
                try? fileManager.removeItem(atPath: path)
            }
        }
        var random = SystemRandomNumberGenerator()
        let folder = uploads + "/" + String(random.next() as UInt64, radix: 16) + String(random.next() as UInt64, radix: 16)
        guard mkdir(folder, 0o700) == 0 else {
            throw .invalidArgument("cannot create \(folder): \(String(cString: strerror(errno)))")
        }
        return folder
    }
}
