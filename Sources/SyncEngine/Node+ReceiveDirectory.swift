internal import Dispatch
internal import FoundationEssentials
internal import Glibc
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

extension Node {
    /// The index setting that keeps the receive folder chosen with `receive-dir`.
    static let receiveDirectorySetting = "receive_dir"

    /// `syncpeer receive-dir DIR`: where accepted files, streams and folders go from now on
    /// (made with its parents if missing; it must be a directory this user can write), kept
    /// across restarts unless `daemon --receive-dir` names another.
    package func setReceiveDirectory(_ directory: String) throws(EngineError) -> NodeStatus {
        guard directory.hasPrefix("/") else { throw .invalidArgument("'\(directory)' is not a full path") }
        let path = URL(fileURLWithPath: directory).standardizedFileURL.path
        do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
            throw .io(path: path, reason: "cannot create the receive folder: \(PlainText.reason(error))")
        }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory, access(path, W_OK) == 0 else {
            throw .io(path: path, reason: "not a folder this user can write into")
        }
        do { try index.setSetting(Self.receiveDirectorySetting, path) } catch { throw .index(error) }
        receiveDirectory.withLock { $0 = path }
        queue.sync {
            transfers.config.receiveDirectory = path
            folders.config.receiveDirectory = path
        }
        streams.receiveDirectory = path
        return status()
    }
}
