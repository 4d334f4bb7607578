internal import COpenSSL

/// SHA-1, for one use only: the `Sec-WebSocket-Accept` check of the WebSocket opening
/// handshake (RFC 6455, section 4.1), which names it. Never for anything that needs security.
package enum SHA1 {
    package static let digestLength = 20

    package static func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        let ok = data.withUnsafeBytes { d in
            EVP_Digest(d.baseAddress ?? UnsafeRawPointer(out), d.count, &out, &length, EVP_sha1(), nil) == 1
        }
        precondition(ok && length == UInt32(digestLength), "SHA-1 failed")
        return Array(out.prefix(digestLength))
    }
}
