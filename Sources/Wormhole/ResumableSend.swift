internal import FoundationEssentials
internal import PeerFiles

/// The sending end of a `resume-v1` transfer over an open Transit connection (see
/// `WormholeResume`): the manifest, the receiver's record of the chunks it holds, then only
/// the chunks it lacks, each read again and checked against the manifest (a file changed
/// since it was chunked stops the transfer), and the receiver's ack naming the same root.
struct ResumableSend {
    let connection: TransitConnection
    let path: String
    let manifest: Manifest
    let report: WormholeTransferReport

    func run() throws(WormholeError) {
        let encoded = manifest.encode()
        for start in stride(from: 0, to: encoded.count, by: WormholeResume.pieceSize) {
            try connection.send(Array(encoded[start..<min(encoded.count, start + WormholeResume.pieceSize)]))
        }
        let bitmap = try connection.receive(deadline: ContinuousClock.now + WormholeResume.stepTimeout)
        let missing = try WormholeResume.missing(bitmap: bitmap, count: manifest.chunks.count)
        let size = Int64(manifest.fileSize)
        var done = size - missing.reduce(Int64(0)) { $0 + Int64(manifest.chunks[$1].size) }
        if done > 0 {
            report.resumed(done)
            report.note("Resuming: the receiver holds \(done) of \(size) bytes already")
        }
        report.progress(done, size)
        let reader: ChunkReader
        do { reader = try ChunkReader(path: path) } catch { throw .transfer("cannot read \(path): \(error)") }
        for index in missing {
            let chunk = manifest.chunks[index]
            let bytes: [UInt8]
            do { bytes = try reader.bytes(of: chunk, verify: true) } catch { throw .transfer("\(error)") }
            for start in stride(from: 0, to: bytes.count, by: WormholeResume.pieceSize) {
                try connection.send(Array(bytes[start..<min(bytes.count, start + WormholeResume.pieceSize)]))
            }
            done += Int64(chunk.size)
            report.progress(done, size)
        }
        let ack = try connection.receive(deadline: ContinuousClock.now + WormholeResume.stepTimeout)
        guard WormholeResume.isAck(ack, root: manifest.rootHash) else {
            throw .remote("the receiver did not confirm the transfer")
        }
    }
}
