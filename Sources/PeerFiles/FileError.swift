internal import Glibc

/// The one I/O error type of PeerFiles: what failed, on which path, the `errno` and what
/// it means for the user. `description` is one line meant to be printed as is.
package struct FileError: Error, CustomStringConvertible, Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// The file system is full (`ENOSPC`) or the user's quota is exhausted (`EDQUOT`).
        /// Whatever was written before stays in place (a partial file is kept for resume).
        case diskFull
        /// A path component is a symbolic link: following it could leave the sync folder.
        case symlinkRefused
        /// A path component that must be a directory is something else.
        case notADirectory
        /// The destination already exists and is never overwritten.
        case alreadyExists
        /// The file or directory does not exist.
        case notFound
        /// The operating system refused access (`EACCES`, `EPERM`, `EROFS`).
        case permissionDenied
        /// The file is shorter than expected or changed while it was read.
        case changedOnDisk
        /// Data did not match its expected hash or size.
        case hashMismatch
        /// A caller-supplied value is not acceptable (a bad transfer ID, an offset out of range).
        case invalidArgument
        /// Any other operating-system failure.
        case io
    }

    package var kind: Kind
    /// The operation that failed: "open", "pwrite", "rename", "fsync", …
    package var operation: String
    /// The path involved, for messages ("" when there is none).
    package var path: String
    /// The `errno` value, when the operating system reported one.
    package var errno: Int32?
    /// An explanation in words.
    package var message: String

    package init(kind: Kind, operation: String, path: String, errno: Int32? = nil, message: String) {
        self.kind = kind
        self.operation = operation
        self.path = path
        self.errno = errno
        self.message = message
    }

    /// A failure reported through `errno`, classified.
    static func system(_ operation: String, path: String, errno code: Int32) -> FileError {
        let kind: Kind
        switch code {
        case ENOSPC, EDQUOT: kind = .diskFull
        case ELOOP: kind = .symlinkRefused
        case ENOTDIR: kind = .notADirectory
        case EEXIST: kind = .alreadyExists
        case ENOENT: kind = .notFound
        case EACCES, EPERM, EROFS: kind = .permissionDenied
        default: kind = .io
        }
        let text = String(cString: strerror(code))
        let message = kind == .diskFull ? "disk full (\(text))" : text
        return FileError(kind: kind, operation: operation, path: path, errno: code, message: message)
    }

    package var description: String {
        let place = path.isEmpty ? "" : " \(path)"
        return "\(operation)\(place): \(message)"
    }
}
