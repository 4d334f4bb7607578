internal import PeerFiles

extension FolderApplier {
    /// The descriptors the batch being prepared holds open (bounded by `batchDescriptors`):
    /// each file's open temporary, each delta base's file, and each directory handle the
    /// batch's files hold, once per handle: the files of one directory share one handle
    /// (`ParentHandles`). Counted once per file before, a batch of files in one folder was
    /// sealed at half its real descriptors (B with this machine's limit of 20,000, so
    /// `batchDescriptors` 1,024: 20 batches of 512 files, each with its two barriers,
    /// instead of 10 of 1,023).
    struct BatchDescriptors {
        private(set) var count = 0
        /// The handles counted (alive while the batch's files hold them, so never reused).
        private var directories = Set<ObjectIdentifier>()

        /// Counts a pending file: its temporary if open (`fd` ≥ 0), and its directory's handle
        /// the first time the batch holds it, unless it is the root (held by the apply anyway).
        mutating func add(fd: Int32, directory: DirectoryHandle, root: DirectoryHandle) {
            if fd >= 0 { count += 1 }
            if directory !== root, directories.insert(ObjectIdentifier(directory)).inserted { count += 1 }
        }

        /// Counts one more open file (a delta base's).
        mutating func addFile() { count += 1 }
    }
}
