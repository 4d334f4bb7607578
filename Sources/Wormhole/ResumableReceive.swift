internal import PeerFiles

/// The receiving end of a `resume-v1` transfer over an open Transit connection (see
/// `WormholeResume`): takes the manifest (exactly the length the offer announced, refused
/// unless it names the offered root and size), re-hashes what its partial file holds of it,
/// tells the sender, then verifies each chunk that arrives before writing it at its offset.
/// A cut leaves the verified chunks in the partial file for the next attempt.
struct ResumableReceive {
    let connection: TransitConnection
    let offer: WormholeResume.Offer
    let size: Int64
    let directory: String
    let report: WormholeTransferReport

    /// Receives every chunk the partial file lacks; returns it complete and synced (the
    /// caller commits it or unpacks it).
    func run() throws(WormholeError) -> PartialFile {
        let manifest = try receiveManifest()
        let partial = try WormholePartials.open(root: offer.root, in: directory)
        let held: [Int]
        do { held = try partial.verifiedChunks(of: manifest) } catch { throw .transfer("reading \(partial.path): \(error)") }
        try connection.send(WormholeResume.bitmap(holding: held, count: manifest.chunks.count))
        var done = held.reduce(Int64(0)) { $0 + Int64(manifest.chunks[$1].size) }
        if done > 0 {
            report.resumed(done)
            report.note("Resuming: \(done) of \(size) bytes are here already from a cut transfer")
        }
        report.progress(done, size)
        let heldSet = Set(held)
        let missing = manifest.chunks.indices.filter { !heldSet.contains($0) }
        let largest = missing.reduce(0) { max($0, Int(manifest.chunks[$1].size)) }
        var buffer = [UInt8]()
        buffer.reserveCapacity(largest)
        do throws(WormholeError) {
            for index in missing {
                let chunk = manifest.chunks[index]
                buffer.removeAll(keepingCapacity: true)
                while buffer.count < Int(chunk.size) {
                    let record = try connection.receive(deadline: ContinuousClock.now + .seconds(120))
                    guard !record.isEmpty, record.count <= Int(chunk.size) - buffer.count else {
                        throw WormholeError.protocolViolation("a record empty or past the end of chunk \(index)")
                    }
                    buffer += record
                }
                do { try partial.writeChunk(buffer, as: chunk) } catch {
                    if error.kind == .hashMismatch { throw WormholeError.protocolViolation("chunk \(index) does not match its hash") }
                    throw WormholeError.transfer("\(error)")
                }
                done += Int64(chunk.size)
                report.progress(done, size)
            }
            do { try partial.sync() } catch { throw WormholeError.transfer("\(error)") }
        } catch {
            if done > 0 {
                report.note("Kept the \(done) of \(size) bytes verified so far: send again with a new code and receive it into the same folder to continue")
            }
            throw error
        }
        return partial
    }

    /// The manifest, in records that add up to exactly the announced length.
    private func receiveManifest() throws(WormholeError) -> Manifest {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(offer.manifestLength)
        while encoded.count < offer.manifestLength {
            let record = try connection.receive(deadline: ContinuousClock.now + WormholeResume.stepTimeout)
            guard !record.isEmpty, record.count <= offer.manifestLength - encoded.count else {
                throw .protocolViolation("the manifest is not the length its \(offer.chunks) offered chunks take")
            }
            encoded += record
        }
        let manifest: Manifest
        do { manifest = try Manifest.decode(encoded) } catch { throw .protocolViolation("a bad manifest: \(error)") }
        guard manifest.rootHash == offer.root, manifest.fileSize == UInt64(size), manifest.chunks.count == offer.chunks else {
            throw .protocolViolation("the manifest does not match the offer")
        }
        return manifest
    }
}
