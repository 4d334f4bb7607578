internal import FoundationEssentials
internal import PeerFiles

/// The receiving side of `resume-v1` (see `WormholeResume`): the file or the folder's zip
/// arrives chunk by chunk into a partial file kept beside the target, which becomes the file
/// (or is unpacked) only once every chunk is verified.
extension WormholeFileReceiver {
    /// The offer's resume field, checked against the offered size; nil for a plain offer, or
    /// for a name our partial files cannot take (a backslash: then the plain transfer).
    /// A malformed one is refused, and the sender told.
    func resumeOffer(_ fields: [String: Any], name: String, size: Int64) throws(WormholeError) -> WormholeResume.Offer? {
        let offer: WormholeResume.Offer?
        do { offer = try WormholeResume.Offer(field: fields[WormholeResume.field], size: size) } catch {
            try? session.send(["error": "a malformed resume offer"])
            throw error
        }
        return (try? SafePath.validateName(name)) == nil ? nil : offer
    }

    /// Accepts in `resume-v1`, receives what the partial file lacks, then places the file
    /// (`folder` nil) or unpacks the zip (at most `folder` bytes); acknowledges with the root.
    func receiveResumable(_ resume: WormholeResume.Offer, name: String, size: Int64, folder unpacked: Int64?) throws(WormholeError) -> String {
        let connection = try accept(name: name, resumable: true)
        defer { connection.close() }
        let partial = try ResumableReceive(connection: connection, offer: resume, size: size, directory: directory, report: report).run()
        let final: String
        if let unpacked {
            defer { try? partial.remove() }
            final = try unpack(zip: partial.path, name: name, unpacked: unpacked)
        } else {
            do {
                let placed = try partial.commit(as: name, mode: 0o644, modificationTime: FileTimestamp(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9)),
                                                size: UInt64(size), onConflict: .pickUniqueName)
                final = PathName.appending(directory, placed)
            } catch { throw .transfer("cannot place \(name) in \(directory): \(error)") }
        }
        WormholePartials.tidy(directory)
        try connection.send(WormholeResume.ack(root: resume.root))
        return final
    }
}
