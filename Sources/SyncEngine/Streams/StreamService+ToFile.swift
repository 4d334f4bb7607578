internal import Foundation
internal import Synchronization
internal import PeerFiles
internal import PeerIndex

/// A stream nobody is waiting for, from a peer whose offers this node accepts without
/// asking (`--auto-accept`, or `auto-accept PEER on`), becomes a file in the receive folder,
/// as `send -` always did: written as it arrives into a partial file (bounded memory: the
/// stream's window), put in place under a safe, unused name only when the stream is
/// complete; a cut stream leaves nothing behind and is reported as failed.
extension StreamService {
    /// Whether streams from the device `deviceKey` are saved without asking. (A switch the
    /// index cannot give reads as off: the stream is offered to the user, nothing more.)
    func savesWithoutAsking(_ deviceKey: String) -> Bool {
        config.autoAccept || ((try? store.peer(deviceID: deviceKey))?.autoAccept ?? false)
    }

    /// Saves `stream` into the receive folder on a thread of its own; reports the outcome
    /// as a `transfer` event (`completed` with the path, or `failed` with why).
    func saveToReceiveFolder(_ stream: IncomingByteStream) {
        let directory = receiveDirectory
        let thread = Thread { [self] in
            let outcome = Self.save(stream, into: directory)
            queue.async { [self] in
                var info = TransferInfo(transfer: nil, direction: .receive, peer: stream.peer, name: stream.name,
                                        state: .completed, bytes: stream.bytesRead, total: stream.bytesRead, files: 1,
                                        time: now())
                switch outcome {
                case let .success(path):
                    info.path = path
                case let .failure(error):
                    info.state = .failed
                    info.reason = error.description
                }
                emit(.transfer(info))
            }
        }
        thread.name = "syncpeer-stream-file"
        thread.start()
    }

    private static func save(_ stream: IncomingByteStream, into directory: String) -> Result<String, EngineError> {
        let partial: PartialFile
        do throws(FileError) {
            let target = try DirectoryHandle(path: directory)
            partial = try PartialFile(transferID: "stream-" + UUID().uuidString, in: target)
        } catch {
            stream.cancel(reason: "the receiver cannot store it")
            return .failure(.file(error))
        }
        var offset: UInt64 = 0
        do throws(EngineError) {
            while let piece = try stream.next() {
                do throws(FileError) { try partial.write(piece, at: offset) } catch {
                    stream.cancel(reason: "the receiver cannot store it")
                    throw .file(error)
                }
                offset += UInt64(piece.count)
            }
            let name = FolderLabel.safeName(stream.name, fallback: "stream")
            let mtime = FileTimestamp(nanosecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1e9))
            do throws(FileError) {
                let placed = try partial.commit(as: name, mode: 0o644, modificationTime: mtime, onConflict: .pickUniqueName)
                return .success(directory + "/" + placed)
            } catch {
                throw .file(error)
            }
        } catch {
            try? partial.remove()
            return .failure(error)
        }
    }
}
