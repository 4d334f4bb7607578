#if canImport(Glibc)
internal import Glibc
#endif
internal import FoundationEssentials
internal import PeerCrypto

/// The node's long-term X25519 key on disk. A small text file, mode 0600:
///
///     syncpeer-identity-v1
///     x25519-private <64 hex digits>
///     x25519-public <64 hex digits>
///
/// The public line lets a load detect a damaged private key (they must match). Writes go
/// to a temporary file that is fsynced and renamed into place, so a crash never leaves a
/// half-written key.
enum IdentityKeyFile {
    static let header = "syncpeer-identity-v1"
    static let maxFileSize = 4096

    /// Reads and checks the key file; throws a clear error for a file that is not a regular
    /// file (a link is not followed), belongs to another user, is readable by others, has
    /// wrong lengths or is damaged, or is missing (`notInitialised`). Every check is made on
    /// the open file, so it cannot be swapped between the check and the read.
    static func load(home: NodeHome) throws(EngineError) -> KeyPair {
        let path = home.keyFile
        // O_NONBLOCK: a FIFO put there must not hang us; it has no effect on a regular file.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            switch errno {
            case ENOENT: throw .notInitialised(home: home.path)
            case ELOOP: throw .keyFileCorrupt(path: path, reason: "it is a symbolic link; the key file must be a regular file")
            case let code: throw .io(path: path, reason: String(cString: strerror(code)))
            }
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io(path: path, reason: String(cString: strerror(errno))) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .keyFileCorrupt(path: path, reason: "not a regular file")
        }
        guard info.st_uid == geteuid() else {
            throw .keyFileNotOwned(path: path, owner: UInt32(info.st_uid), user: UInt32(geteuid()))
        }
        let mode = UInt32(info.st_mode) & 0o777
        guard mode & 0o077 == 0 else { throw .keyFileExposed(path: path, mode: mode) }
        guard info.st_size <= maxFileSize else {
            throw .keyFileCorrupt(path: path, reason: "\(info.st_size) bytes, far more than a key file holds")
        }
        var text = [UInt8](repeating: 0, count: maxFileSize + 1)
        defer { wipe(&text) }
        var count = 0
        while count < text.count {
            let n = text.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .io(path: path, reason: "cannot read it: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            count += n
        }
        guard count <= maxFileSize else {
            throw .keyFileCorrupt(path: path, reason: "more than \(maxFileSize) bytes, far more than a key file holds")
        }
        var content = Array(text[0..<count])
        defer { wipe(&content) }
        return try parse(content, path: path)
    }

    static func parse(_ text: [UInt8], path: String) throws(EngineError) -> KeyPair {
        let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        guard lines.first.map({ Array($0) }) == Array(header.utf8) else {
            throw .keyFileCorrupt(path: path, reason: "first line is not '\(header)'")
        }
        var privateHex: [UInt8]?
        var publicHex: [UInt8]?
        for line in lines.dropFirst() {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count == 2 else { throw .keyFileCorrupt(path: path, reason: "a line is not 'name value'") }
            switch String(decoding: fields[0], as: UTF8.self) {
            case "x25519-private": privateHex = Array(fields[1])
            case "x25519-public": publicHex = Array(fields[1])
            default: throw .keyFileCorrupt(path: path, reason: "unknown line '\(String(decoding: fields[0].prefix(32), as: UTF8.self))'")
            }
        }
        guard var privateHex, let publicHex else {
            throw .keyFileCorrupt(path: path, reason: "the private or public key line is missing")
        }
        defer { wipe(&privateHex) }
        guard var secret = bytes(fromHex: String(decoding: privateHex, as: UTF8.self)) else {
            throw .keyFileCorrupt(path: path, reason: "the private key is not hexadecimal")
        }
        defer { wipe(&secret) }
        guard secret.count == KeyPair.privateByteCount else {
            throw .keyFileCorrupt(path: path, reason: "the private key is \(secret.count) bytes, expected \(KeyPair.privateByteCount)")
        }
        let keyPair: KeyPair
        do { keyPair = try KeyPair(privateKeyBytes: secret) } catch {
            throw .keyFileCorrupt(path: path, reason: error.description)
        }
        guard String(decoding: publicHex, as: UTF8.self).lowercased() == keyPair.publicKey.description else {
            throw .keyFileCorrupt(path: path, reason: "the private key does not match the public key (the file is damaged)")
        }
        return keyPair
    }

    /// Writes a new key file atomically with mode 0600. Refuses to replace an existing one.
    static func create(_ keyPair: KeyPair, home: NodeHome) throws(EngineError) {
        let path = home.keyFile
        let temporary = path + ".tmp-\(getpid())"
        var secretHex = Array(hex(keyPair.privateKey.unsafeCopy()).utf8)
        defer { wipe(&secretHex) }
        var contents = Array("\(header)\nx25519-private ".utf8) + secretHex
            + Array("\nx25519-public \(keyPair.publicKey.description)\n".utf8)
        defer { wipe(&contents) }

        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io(path: temporary, reason: String(cString: strerror(errno))) }
        var failure: String?
        let written = contents.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        if written != contents.count { failure = "write failed: \(String(cString: strerror(errno)))" }
        else if fsync(fd) != 0 { failure = "fsync failed: \(String(cString: strerror(errno)))" }
        close(fd)
        if let failure {
            unlink(temporary)
            throw .io(path: temporary, reason: failure)
        }
        // link() fails if the target exists, so two concurrent inits cannot both win.
        guard link(temporary, path) == 0 else {
            let reason = errno == EEXIST ? "a key file already exists" : String(cString: strerror(errno))
            unlink(temporary)
            throw .io(path: path, reason: reason)
        }
        unlink(temporary)
        syncDirectory(home.path)
    }

    /// fsyncs a directory so a rename or link in it is durable.
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
    }
}
