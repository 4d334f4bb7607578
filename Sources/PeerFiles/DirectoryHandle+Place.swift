#if canImport(Glibc)
internal import Glibc
#endif

/// What `placeNew`, `replace` and `remove` did.
package enum PlaceOutcome: Equatable, Sendable {
    /// The entry is in place (for `remove`: gone).
    case done
    /// What is at the name is not what was expected: it stays as it is (and should be scanned).
    case changedHere
    /// What came out was not what was expected and could not go back: it is at this (hidden)
    /// name now, and the caller must give it a visible one.
    case stranded(String)
    /// The rename failed with this errno.
    case failed(Int32)
}

/// Putting an entry in place, and taking one away, with no window in which another
/// process's write at that name could be replaced.
///
/// Checking what is at a name and then renaming over it leaves a gap: a user who saves a file
/// between the check and the rename loses that version. So where nothing is expected the
/// rename refuses to replace (`RENAME_NOREPLACE`); where a known version is expected the new
/// entry is swapped in atomically (`RENAME_EXCHANGE`) and the entry that comes out is
/// checked (another one is swapped back); and a removal moves the entry aside first, checks
/// what it moved, and puts back what was not expected. On file systems or kernels without
/// `renameat2`'s flags, check-then-rename is what remains.
extension DirectoryHandle {
    static let renameNoReplace: UInt32 = 1 << 0   // RENAME_NOREPLACE
    static let renameExchange: UInt32 = 1 << 1    // RENAME_EXCHANGE

    /// renameat2 within this directory; -1 with errno ENOSYS when the C library lacks it.
    func rename2(_ from: String, _ to: String, _ flags: UInt32) -> Int32 {
        guard let renameat2 = PartialFile.renameat2Function else {
            errno = ENOSYS
            return -1
        }
        return renameat2(fd, from, fd, to, flags)
    }

    /// The errno of a renameat2 whose flags this kernel (ENOSYS) or file system (EINVAL,
    /// ENOTSUP) does not support: the caller falls back to a plain rename or link + unlink.
    /// The one test of it, for every renameat2 with flags.
    static func flagsUnsupported(_ code: Int32) -> Bool { code == EINVAL || code == ENOSYS || code == ENOTSUP }

    /// Swaps the entries at `name` and `other` atomically (`RENAME_EXCHANGE`); false when
    /// that fails or is not supported (nothing moved then).
    package func exchange(_ name: String, _ other: String) -> Bool {
        rename2(name, other, Self.renameExchange) == 0
    }

    /// Renames `temp` to `name` only if nothing is at `name` (else `.changedHere`).
    package func placeNew(_ temp: String, as name: String) -> PlaceOutcome {
        if rename2(temp, name, Self.renameNoReplace) == 0 { return .done }
        let code = errno
        if code == EEXIST { return .changedHere }
        guard Self.flagsUnsupported(code) else { return .failed(code) }
        if entryKind(name) != nil { return .changedHere }
        return renameat(fd, temp, fd, name) == 0 ? .done : .failed(errno)
    }

    /// Swaps `temp` in for the entry at `name`; the entry that comes out (then at `temp`) is
    /// removed when `isExpected(temp)` says it is the version meant to be replaced, and
    /// swapped back otherwise (`.changedHere`; `temp` then holds its own content again).
    /// Nothing at `name` (deleted since) is `.changedHere` too. With `removingOutgoing: false`
    /// the expected entry that came out stays at `temp` for the caller to remove (removing a
    /// large file takes a while, and need not delay what follows the rename).
    package func replace(_ name: String, with temp: String, removingOutgoing: Bool = true,
                        ifOutgoing isExpected: (String) -> Bool) -> PlaceOutcome {
        guard rename2(temp, name, Self.renameExchange) == 0 else {
            let code = errno
            if code == ENOENT { return entryKind(temp) == nil ? .failed(code) : .changedHere }
            guard Self.flagsUnsupported(code) else { return .failed(code) }
            return renameat(fd, temp, fd, name) == 0 ? .done : .failed(errno)
        }
        if isExpected(temp) {
            if removingOutgoing { unlinkat(fd, temp, 0) }
            return .done
        }
        if rename2(temp, name, Self.renameExchange) == 0 { return .changedHere }
        return .stranded(temp)
    }

    /// Removes the entry at `name` (not a directory) if `isExpected` says it is the version
    /// meant to go: it is moved to `aside` first and checked there, and put back when it is
    /// not (`.changedHere`). Nothing at `name` is `.done`.
    package func remove(_ name: String, via aside: String, ifExpected isExpected: (String) -> Bool) -> PlaceOutcome {
        var moved = rename2(name, aside, Self.renameNoReplace) == 0
        if !moved && errno == EEXIST {   // left by a killed process
            unlinkat(fd, aside, 0)
            moved = rename2(name, aside, Self.renameNoReplace) == 0
        }
        guard moved else {
            let code = errno
            if code == ENOENT { return .done }
            guard Self.flagsUnsupported(code) else { return .failed(code) }
            guard isExpected(name) else { return .changedHere }
            return unlinkat(fd, name, 0) == 0 || errno == ENOENT ? .done : .failed(errno)
        }
        if isExpected(aside) {
            return unlinkat(fd, aside, 0) == 0 || errno == ENOENT ? .done : .failed(errno)
        }
        if rename2(aside, name, Self.renameNoReplace) == 0 { return .changedHere }
        return Self.flagsUnsupported(errno) && entryKind(name) == nil && renameat(fd, aside, fd, name) == 0
            ? .changedHere : .stranded(aside)
    }
}
