public import Foundation
import Glibc

/// A TLS server a test runs on 127.0.0.1 (`Servers/tls_server.py`, python3's ssl): a relay
/// pool serving a file over HTTPS, or a relay that lies in protocol mode. Stopped by its PID.
public final class TLSTestServer {
    let process = Process()
    public let port: UInt16
    /// The certificate it presents (DER).
    public let certificate: [UInt8]

    public struct Failure: Error, CustomStringConvertible { public var description: String }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Servers/tls_server.py").path

    /// An HTTPS server answering every request with `body`, with a certificate `ca` issued
    /// for `names` (the default: 127.0.0.1 and localhost).
    public static func pool(serving body: [UInt8], ca: TestCA, names: [String] = ["IP:127.0.0.1", "DNS:localhost"]) throws -> TLSTestServer {
        let file = ca.directory.appendingPathComponent("pool-\(UUID().uuidString.prefix(8)).json")
        try Data(body).write(to: file)
        let (cert, key) = try ca.issue(names)
        return try TLSTestServer(cert: cert, key: key, arguments: ["pool", file.path])
    }

    /// A relay (protocol mode, self-signed, so pinned by its certificate ID) that answers the
    /// first message with `lie` (see tls_server.py: garbage, huge, silence, full, other, ok).
    public static func relay(lie: String, ca: TestCA) throws -> TLSTestServer {
        let (cert, key) = try ca.selfSigned()
        return try TLSTestServer(cert: cert, key: key, arguments: ["relay", lie])
    }

    init(cert: URL, key: URL, arguments: [String]) throws {
        certificate = try TestCA.der(ofPEM: cert)
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.script, cert.path, key.path] + arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableLine(), as: UTF8.self)
        guard line.hasPrefix("port "), let port = UInt16(line.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw Failure(description: "tls_server.py did not start: '\(line)'")
        }
        self.port = port
    }

    /// SIGKILL: a child of the test process may inherit its blocked signals (SIGTERM among them).
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

extension FileHandle {
    /// Bytes up to the first newline (or the end).
    func availableLine() -> [UInt8] {
        var line: [UInt8] = []
        while true {
            let byte = readData(ofLength: 1)
            guard let first = byte.first, first != 10 else { return line }
            line.append(first)
        }
    }
}

/// A certificate authority made for one test (openssl's command line, EC P-256 keys, two
/// days), in a temporary directory: `caFile` is what `SSL_CERT_FILE` points a client at.
public final class TestCA: Sendable {
    public let directory: URL
    public var caFile: URL { directory.appendingPathComponent("ca.pem") }

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-ca-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                     "-subj", "/CN=syncpeer test CA", "-keyout", "ca.key", "-out", "ca.pem"])
    }

    /// A certificate and key issued by this CA for `names` ("DNS:host", "IP:address").
    public func issue(_ names: [String]) throws -> (cert: URL, key: URL) {
        let name = "server-\(UUID().uuidString.prefix(8))"
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-subj", "/CN=syncpeer test server", "-keyout", "\(name).key", "-out", "\(name).csr"])
        let extensions = directory.appendingPathComponent("\(name).ext")
        try "subjectAltName=\(names.joined(separator: ","))\n".write(to: extensions, atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-days", "2", "-extfile", extensions.path, "-out", "\(name).pem"])
        return (directory.appendingPathComponent("\(name).pem"), directory.appendingPathComponent("\(name).key"))
    }

    /// A self-signed certificate (no CA vouches for it).
    public func selfSigned() throws -> (cert: URL, key: URL) {
        let name = "self-\(UUID().uuidString.prefix(8))"
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                     "-subj", "/CN=syncpeer test relay", "-addext", "subjectAltName=IP:127.0.0.1",
                     "-keyout", "\(name).key", "-out", "\(name).pem"])
        return (directory.appendingPathComponent("\(name).pem"), directory.appendingPathComponent("\(name).key"))
    }

    static func der(ofPEM file: URL) throws -> [UInt8] {
        let pem = try String(contentsOf: file, encoding: .utf8)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body) else { throw TLSTestServer.Failure(description: "\(file.path) is not PEM") }
        return Array(der)
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let text = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TLSTestServer.Failure(description: "openssl \(arguments.first ?? ""): \(String(decoding: text, as: UTF8.self))")
        }
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }
}
