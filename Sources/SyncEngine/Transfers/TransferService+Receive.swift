#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire

/// Receiving: the partial files opened on `io` (and what they hold), each chunk verified and
/// written, the files put in place, the end and the removal of what a cancel leaves.
extension TransferService {
    /// Opens (or re-opens) the partial files, finds the chunks they already hold, records
    /// the transfer and sends the accept.
    func startReceiving(_ transfer: IncomingTransfer, into directory: String) {
        // Chunks this process verified and wrote (a link lost and back, no restart): held.
        // (The layout is the node queue's: a streamed manifest grows there.)
        let (recordID, known, layout, resumed, earlier) = transfer.with {
            ($0.recordID, $0.verified, $0.layout, $0.resumed, $0.supersedes)
        }
        let receiveDirectory = config.receiveDirectory
        transfer.io.async { [self] in
            // What is open already (a link lost and back), taken in one step and put back
            // after (only `io` opens and closes them).
            var (openTarget, openTree, partials) = transfer.with { ($0.target, $0.tree, $0.partials) }
            var have = Set<Int>()
            let outcome: Result<Void, FileError> = Result { () throws(FileError) in
                if openTarget == nil {
                    // The default receive folder (~/Downloads) is made when it is missing; a
                    // folder the user named must exist (the CLI checks it).
                    if directory == receiveDirectory, !FileManager.default.fileExists(atPath: directory) {
                        do throws(FileError) { try DurableNames.createDirectories(directory) } catch {
                            // The message goes to the sender: the system's words, never the path.
                            let code = error.errno
                            throw FileError(kind: .io, operation: "create the receive folder", path: directory,
                                            message: code.map { String(cString: strerror($0)) } ?? "cannot create it")
                        }
                    }
                    openTarget = try DirectoryHandle(path: directory)
                }
                let target = openTarget!
                if transfer.offer.kind == .folder {
                    if openTree == nil {
                        let staging = try target.openSubdirectory(PartialFile.stagingDirectoryName, create: true)
                        openTree = try staging.openSubdirectory(recordID + ".tree", create: true)
                    }
                }
                for entry in layout.fileSizes.indices {
                    let partial: PartialFile
                    if let open = partials[entry] { partial = open } else {
                        if let tree = openTree {
                            let resolved = try transfer.paths[entry].resolve(under: tree, createDirectories: true)
                            partial = try PartialFile(transferID: "\(recordID)-\(entry)", in: resolved.directory)
                        } else {
                            partial = try PartialFile(transferID: recordID, in: target)
                        }
                        partials[entry] = partial
                    }
                    // What it holds: the chunks verified in this process (a link lost and
                    // back), without reading them; for the rest the file is the truth:
                    // re-hashed, also the chunks the index recorded as verified before a
                    // restart (a row is no proof that the bytes are still intact on disk), and
                    // it finds the chunks written just before a crash.
                    // (A streamed manifest's chunks are all to come.)
                    guard let manifest = layout.manifest(of: entry) else { continue }
                    if resumed {
                        let first = layout.firstChunk[entry]
                        var trusted = Set<Int>()
                        for global in known where layout.range(of: entry).contains(global) {
                            trusted.insert(global - first)
                        }
                        for local in try partial.verifiedChunks(of: manifest, trusting: trusted) {
                            have.insert(first + local)
                        }
                    }
                    if let earlier {
                        for local in try copyMatchingChunks(from: earlier, in: target, to: partial, manifest: manifest)
                        where !have.contains(layout.firstChunk[entry] + local) {
                            have.insert(layout.firstChunk[entry] + local)
                        }
                    }
                }
            }
            let (opened, tree, open) = (openTarget, openTree, partials)
            transfer.with { t in
                t.target = opened
                t.tree = tree
                t.partials = open
            }
            let held = have
            queue.async { [self] in
                let have = held
                switch outcome {
                case let .failure(error):
                    perform(.cannotOpen(path: directory, reason: error.description, cause: error.message,
                                        diskFull: error.kind == .diskFull), on: transfer)
                case .success:
                    let layout = transfer.layout
                    let verifiedBytes = have.reduce(Int64(0)) { total, index in
                        total + Int64(layout.locate(index)?.chunk.size ?? 0)
                    }
                    transfer.with { t in
                        t.verified = have
                        t.verifiedBytes = verifiedBytes
                    }
                    let machine = OfferMachine(role: .receive, id: transfer.id, peer: transfer.peer.name)
                    let opened = OfferMachine.Event.opened(have: have, offered: layout.offeredChunkCount,
                                                           whole: layout.isComplete && have.count == layout.chunkCount)
                    carryOut(machine.handle(opened, in: transfer.state), on: transfer, session: nil)
                }
            }
        }
    }

    /// Copies the verified chunks of an earlier partial file that the new manifest also
    /// contains (by hash, wherever they now are) into the new partial file; returns their
    /// indices in the new manifest. Runs on the transfer's `io` queue; the earlier partial
    /// is removed afterwards (a removal that fails is reported and tried again) and its
    /// record marked as superseded. When its chunks cannot be read from the index, it is
    /// kept with its record (reported): what it holds cannot be told without them.
    private func copyMatchingChunks(from earlier: TransferRecord, in target: DirectoryHandle, to partial: PartialFile,
                                    manifest: Manifest) throws(FileError) -> [Int] {
        guard let old = try PartialFile.existing(transferID: earlier.id, in: target) else { return [] }
        let chunks: [TransferChunk]
        do { chunks = try store.transferChunks(transferID: earlier.id) } catch {
            let reason = "cannot read which chunks the earlier partial data of \(earlier.name) (\(earlier.id.prefix(8))) holds, "
                + "so it is received anew and that data kept: \(error.description)"
            queue.async { [self] in emitError(nil, reason) }
            return []
        }
        // Every chunk the earlier partial may hold (recorded or not: verification is batched),
        // each checked by its hash when read.
        var located: [ChunkHash: TransferChunk] = [:]
        for chunk in chunks {
            if let hash = ChunkHash(bytes: chunk.hash) { located[hash] = chunk }
        }
        if earlier.rootHash == TransferRecord.unknownRootHash {
            // Its manifest streamed, and its rows end where its last record did: what the
            // partial file holds past them is cut again (the same cuts as the sender's, from
            // the end of the last row on) to find the chunks written since.
            let known = chunks.map { UInt64($0.offset + $0.size) }.max() ?? 0
            let end = min(try old.size(), UInt64(max(0, earlier.size)))
            if known < end, let cut = try? ChunkReader(path: old.path).cutChunks(
                from: known, to: end, parameters: .forFileSize(UInt64(earlier.size))) {
                for chunk in cut where located[chunk.hash] == nil {
                    located[chunk.hash] = TransferChunk(index: -1, offset: Int64(chunk.offset), size: Int64(chunk.size),
                                                        hash: chunk.hash.bytes, verified: false)
                }
            }
        }
        var copied: [Int] = []
        if !located.isEmpty {
            let reader = try ChunkReader(path: old.path)
            for (index, chunk) in manifest.chunks.enumerated() {
                guard let source = located[chunk.hash], source.size == Int64(chunk.size) else { continue }
                let ref = ChunkRef(offset: UInt64(source.offset), size: chunk.size, hash: chunk.hash)
                guard let bytes = try? reader.bytes(of: ref, verify: true) else { continue }
                try partial.writeChunk(bytes, as: chunk)
                copied.append(index)
            }
        }
        do { try old.remove() } catch {
            removeStaged(earlier.id, in: target.path, name: earlier.name)  // reported, tried again
        }
        do throws(IndexError) {
            try store.updateTransferState(id: earlier.id, to: .cancelled, error: "superseded: the source changed and was sent again")
        } catch {
            let reason = Self.recordFailure("that it was superseded", name: earlier.name, id: earlier.id, error)
            queue.async { [self] in emitError(nil, reason) }
        }
        return copied
    }

    /// What a chunk that arrived is, taken in one step of the transfer's lock.
    private enum ArrivedStep: Sendable {
        case ignored, duplicate, write(entry: Int, chunk: ChunkRef)
    }

    /// What the write of a chunk did, taken in one step of the transfer's lock.
    private enum WrittenStep: Sendable {
        case ignored, failedVerification(Int), failed(directory: String?), verified(sessionID: UInt64?, whole: Bool)
    }

    func chunkReceived(_ id: TransferID, index: Int, data: [UInt8], from session: LinkSession) {
        guard let transfer = transfers.incoming[id], transfer.peerKey == session.deviceKey else { return }
        let size = Int64(data.count)
        let arrived: ArrivedStep = transfer.with { t in
            guard t.shared.state == .active, let (entry, chunk) = t.layout.locate(index) else { return .ignored }
            if t.verified.contains(index) {
                // (Not counted against an announced figure: a chunk the sender sent before is
                // in it already, and one it sends for the first time was not sent twice.)
                t.duplicateBytes += size
                return .duplicate
            }
            return .write(entry: entry, chunk: chunk)
        }
        let entry: Int, chunk: ChunkRef
        switch arrived {
        case .ignored:
            return
        case .duplicate:
            sendTo(transfer, [.chunkAck(id: id, index: UInt32(index), ok: true)])
            return
        case let .write(e, c):
            (entry, chunk) = (e, c)
        }
        // Until it is on disk the chunk counts as unhandled in the session's flow: a sender
        // faster than our disk (or one resending chunks in flight) is read no faster.
        let flow = session.flow
        flow.received(data.count)
        transfer.io.async { [self] in
            defer { flow.handled(data.count) }
            var outcome: FileError?
            do throws(FileError) {
                guard let partial = transfer.with({ $0.partials[entry] }) else { return }
                try partial.writeChunk(data, as: chunk)
            } catch {
                outcome = error
            }
            let failure = outcome
            queue.async { [self] in
                let written: WrittenStep = transfer.with { t in
                    guard t.shared.state == .active else { return .ignored }
                    if let failure {
                        guard failure.kind == .hashMismatch else { return .failed(directory: t.directory) }
                        t.duplicateBytes += size
                        t.attemptDuplicates += size
                        t.badChunks += 1
                        return .failedVerification(t.badChunks)
                    }
                    if t.verified.insert(index).inserted {
                        t.verifiedBytes += Int64(chunk.size)
                        t.unrecorded.append(index)
                    }
                    return .verified(sessionID: t.shared.sessionID,
                                     whole: t.layout.isComplete && t.verified.count == t.layout.chunkCount)
                }
                switch written {
                case .ignored:
                    return
                case let .failedVerification(count):
                    if count > Self.maxBadChunks {
                        perform(.tooManyBadChunks(count), on: transfer)
                        return
                    }
                    emitError(transfer.peer, "chunk \(index) of \(transfer.name) failed verification; asked for it again")
                    sendTo(transfer, [.chunkAck(id: id, index: UInt32(index), ok: false)])
                case let .failed(directory):
                    // Disk full or another write error: keep the partial data, pause.
                    let reason = failure?.kind == .diskFull
                        ? "disk full on the receiver (\(directory ?? "")): free some space, then resume"
                        : failure?.description ?? ""
                    perform(.writeFailed(path: directory ?? "", reason: reason), on: transfer)
                case let .verified(sessionID, whole):
                    if let sessionID { link?.send([.chunkAck(id: id, index: UInt32(index), ok: true)], on: sessionID) }
                    recordVerified(transfer, force: false)
                    emitTransfer(transfer, force: false)
                    if whole { complete(transfer) }
                }
            }
        }
    }

    /// Every chunk is verified: make each file final (fsync, mode, mtime, no-replace rename);
    /// a folder appears at once, complete.
    func complete(_ transfer: IncomingTransfer) {
        guard transfer.with({ t in
            if t.completing { return false }
            t.completing = true
            return true
        }) else { return }
        recordVerified(transfer, force: true)
        transfer.move(to: .finishing)
        let (recordID, layout) = transfer.with { ($0.recordID, $0.layout) }
        transfer.io.async { [self] in
            let (openTarget, partials, openTree) = transfer.with { ($0.target, $0.partials, $0.tree) }
            let outcome: Result<String, FileError> = Result { () throws(FileError) in
                guard let target = openTarget else { throw FileError(kind: .io, operation: "finish", path: "", message: "no target") }
                for (entry, manifest) in layout.manifests.enumerated() {
                    guard let partial = partials[entry] else { continue }
                    let meta = transfer.offer.entries[entry]
                    let time = FileTimestamp(nanosecondsSinceEpoch: meta.mtimeNanoseconds)
                    if let tree = openTree {
                        let resolved = try transfer.paths[entry].resolve(under: tree, createDirectories: true)
                        try partial.commit(as: resolved.name, mode: meta.mode, modificationTime: time, size: manifest.fileSize, onConflict: .fail)
                        resolved.directory.removeIfEmpty(PartialFile.stagingDirectoryName)
                    } else {
                        let name = try partial.commit(as: transfer.offer.name, mode: meta.mode, modificationTime: time,
                                                      size: manifest.fileSize, onConflict: .pickUniqueName)
                        target.removeIfEmpty(PartialFile.stagingDirectoryName)
                        return target.path + "/" + name
                    }
                }
                guard let tree = openTree else { return target.path }
                tree.removeIfEmpty(PartialFile.stagingDirectoryName)
                let staging = try target.openSubdirectory(PartialFile.stagingDirectoryName)
                var name = transfer.offer.name
                while true {
                    do throws(FileError) {
                        try staging.move(recordID + ".tree", to: target, as: name)
                        break
                    } catch where error.kind == .alreadyExists {
                        name = target.uniqueName(for: transfer.offer.name)
                    }
                }
                target.removeIfEmpty(PartialFile.stagingDirectoryName)
                try target.sync()
                return target.path + "/" + name
            }
            queue.async { [self] in
                switch outcome {
                case let .success(path):
                    recordTransfer(transfer, "its completion") { store throws(IndexError) in
                        try recordStreamedRows(transfer, in: store)
                        try store.updateTransferState(id: recordID, to: .completed)
                        try store.setTransferFinalPath(id: recordID, path: path)
                    }
                    transfer.with { $0.finalPath = path }
                    perform(.placed, on: transfer)
                case let .failure(error):
                    let directory = transfer.with { t in
                        t.completing = false
                        return t.directory
                    }
                    let reason = error.kind == .diskFull ? "disk full on the receiver: free some space, then resume" : error.description
                    perform(.writeFailed(path: directory ?? "", reason: reason), on: transfer)
                }
            }
        }
    }

    func finishIncoming(_ transfer: IncomingTransfer, state: TransferState, error: EngineError?) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard transfer.move(to: state) else { return }
        let recordID = transfer.recordID
        let message = error?.description ?? (state == .declined || state == .cancelled ? state.rawValue : nil)
        recordTransfer(transfer, "its \(state) state") { store throws(IndexError) in
            // An offer never accepted has no record to update.
            if try store.transfer(id: recordID) == nil { return }
            try store.updateTransferState(id: recordID, to: state.recorded, error: message)
        }
        let event = transferEvent(transfer, force: true, reason: error?.description)
        emit(.transfer(event))
        for observer in transfer.takeObservers() {
            if let error { observer.completion(.failure(error)) } else { observer.completion(.success(event)) }
        }
        pruneHistory()
        table { $0.incoming[transfer.id] = nil }
        // (The files close once out of the lock.)
        transfer.io.async { _ = transfer.with { t in
            defer { t.partials = [:] }
            return t.partials
        } }
    }

    func removePartials(_ transfer: IncomingTransfer) {
        let recordID = transfer.recordID
        let name = transfer.name
        transfer.io.async { [self] in
            let (partials, target) = transfer.with { t in
                defer { t.partials = [:] }
                return (t.partials, t.target)
            }
            let paths = partials.values.map(\.path)
            // Closes each file; what is not removed here is removed by path, reported and retried.
            for partial in partials.values { try? partial.remove() }
            let directory = target?.path
            retryCleanup("the partial data of \(name)", on: transfer.io) { () throws(FileError) in
                for path in paths where unlink(path) != 0 && errno != ENOENT {
                    throw FileError(kind: .io, operation: "remove partial file", path: path, message: String(cString: strerror(errno)))
                }
                if let directory { try Self.removeStaged(recordID, in: directory, files: false) }
            }
        }
    }
}
