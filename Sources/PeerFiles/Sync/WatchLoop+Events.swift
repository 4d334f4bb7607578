internal import Glibc
internal import Synchronization

// Reading the kernel's events and turning each into the batch's paths, renames and flags.
extension WatchLoop {
    /// Reads and handles every queued event; how many there were.
    @discardableResult
    func readEvents(_ buffer: inout UnsafeMutableRawPointer) -> Int {
        let headerSize = 16
        var count = 0
        // The patterns once per read, not once per event (each read of them takes the lock
        // shared with the node's threads and copies them).
        let ignores = self.ignores
        while true {
            let n = read(inotify, buffer, 64 << 10)
            if n <= 0 { return count }   // EAGAIN: drained
            var offset = 0
            while offset + headerSize <= n {
                let wd = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let cookie = buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                let length = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = buffer.advanced(by: offset + headerSize).assumingMemoryBound(to: UInt8.self)
                let nameLength = strnlen(UnsafeRawPointer(nameStart).assumingMemoryBound(to: CChar.self), length)
                let nameBytes = UnsafeBufferPointer(start: nameStart, count: nameLength)
                offset += headerSize + length
                count += 1
                handle(wd: wd, mask: mask, cookie: cookie, name: nameBytes, ignores: ignores)
            }
        }
    }

    func handle(wd: Int32, mask: UInt32, cookie: UInt32, name nameBytes: UnsafeBufferPointer<UInt8>, ignores: IgnorePatterns) {
        if finished { return }
        func has(_ flag: Int32) -> Bool { mask & UInt32(bitPattern: flag) != 0 }
        if has(IN_Q_OVERFLOW) {
            flags.insert(.overflow)
            noteEvent()
            // Directories created during the overflow may be unwatched: walk the tree again.
            if let fd = Optional(open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)), fd >= 0 {
                watchTree(fd, path: "", report: false)
                close(fd)
            }
            return
        }
        guard let directory = directories[wd] else { return }
        if has(IN_IGNORED) {
            directories[wd] = nil
            if descriptors[PathKey(directory)] == wd { descriptors[PathKey(directory)] = nil }
            owner?.shared.withLock { $0.watchCount = directories.count }
            if wd == rootWd { markRootGone() }
            return
        }
        if wd == rootWd && (has(IN_DELETE_SELF) || has(IN_MOVE_SELF) || has(IN_UNMOUNT)) {
            markRootGone()
            return
        }
        if has(IN_DELETE_SELF) || has(IN_MOVE_SELF) || has(IN_UNMOUNT) { return }   // the parent reports it
        guard nameBytes.count > 0 else {
            if !directory.isEmpty && has(IN_ATTRIB) { noteChanged(directory) }
            return
        }
        // A pull's temporaries are ignored whatever the rules, and each makes five events before
        // its rename (create, write, mode, time, close): only its renames matter here.
        let temporary = IgnorePatterns.temporaryBytes
        let isTemporary = nameBytes.count >= temporary.count && nameBytes.suffix(temporary.count).elementsEqual(temporary)
        if isTemporary && !has(IN_MOVED_FROM) && !has(IN_MOVED_TO) { return }
        if isTemporary && has(IN_MOVED_FROM) && !has(IN_ISDIR) {
            // A pull's temporary file renamed into place: only its cookie matters (ignored
            // whatever the rules, it is no rename to report), not its path (B: 10,000 a pull).
            moves[cookie] = ("", false, false)
            noteEvent()
            return
        }
        guard SafePath.firstInvalidUTF8(Array(nameBytes)) == nil else { return }   // the scanner reports those
        let name = String(decoding: nameBytes, as: UTF8.self)
        let path = directory.isEmpty ? name : directory + "/" + name
        let isDirectory = has(IN_ISDIR)
        let ignored = ignores.isIgnored(path, isDirectory: isDirectory)
        // The ignore file is never synced, but any change to it (written, replaced by a
        // rename, deleted) is reported so that its owner reloads the patterns.
        if path == IgnorePatterns.fileName && !isDirectory { noteChanged(path) }

        if has(IN_CLOSE_WRITE) || has(IN_MOVED_TO) { unsettled.remove(PathKey(path)) }   // complete there now
        if has(IN_MOVED_FROM) {
            moves[cookie] = (path, isDirectory, !ignored)
            if ignored { noteEvent() } else if noteChanged(path) { unsettled.insert(PathKey(path)) }
            return
        }
        if has(IN_MOVED_TO) {
            if let from = moves.removeValue(forKey: cookie) {
                if isDirectory {
                    if ignored {
                        unwatch(from.path)
                    } else {
                        if from.reportable { rewatch(from: from.path, to: path) }
                        // The paths were remapped as of this event, but the tree may have
                        // moved on since (the directory was made under a name it no longer
                        // has, a new one took the old name, its parent moved): watch what is
                        // there now, by inode, and report what it holds.
                        watchNewDirectory(path, report: true)
                    }
                }
                if !ignored {
                    noteChanged(path)
                    if from.reportable && !isOwnWrite(from.path) && !isOwnWrite(path) { renames.append((from.path, path)) }
                }
            } else if !ignored {
                noteChanged(path)   // moved in from outside the folder
                if isDirectory { watchNewDirectory(path, report: true) }
            }
            return
        }
        if ignored { return }
        if has(IN_CREATE) && isDirectory { watchNewDirectory(path, report: true) }
        if noteChanged(path), has(IN_MODIFY) || has(IN_DELETE) || (has(IN_CREATE) && !isDirectory) {
            unsettled.insert(PathKey(path))
        }
    }

    func markRootGone() {
        guard !rootGone else { return }
        rootGone = true
        flags.insert(.rootGone)
        noteEvent()
    }
}
