/// One chunk of a ``Frame/growingFile(folder:path:scan:size:offset:chunks:)``: its size and
/// BLAKE3 hash (32 bytes); its offset follows from the chunks before it.
package struct GrowingChunk: Sendable, Hashable {
    package var size: UInt32
    package var hash: [UInt8]

    package init(size: UInt32, hash: [UInt8]) {
        self.size = size
        self.hash = hash
    }
}
