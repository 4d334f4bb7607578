/// The directories of many paths resolved one after the other, each opened once: paths in
/// the same directory share its handle (`SafePath.resolve` opens every parent again).
///
/// A handle reaches its directory wherever the directory goes: a holder must check that it
/// is still in place before putting anything through it (as for any handle kept a while),
/// and should `clear` the cache at least as often as it checks. At most `limit` handles are
/// held (then the cache starts again), so descriptors stay bounded whatever the paths.
package struct ParentHandles {
    private var handles: [PathKey: DirectoryHandle] = [:]
    /// The parent resolved last, by its components: a pull's paths come in order, so most
    /// share it and need no key joined and hashed (D: 0.07 of bob's CPU-s went to the joins).
    private var last: (components: ArraySlice<String>, handle: DirectoryHandle)?
    package static let limit = 64

    package init() {}

    /// Handles held now.
    package var count: Int { handles.count }

    /// `path` resolved under `root` (as `SafePath.resolve`, without creating anything), its
    /// parent taken from the cache when held. Without `lookingUp`, what exists at the name is
    /// not looked up when the parent is held (`existing` is then nil whatever is there): for
    /// callers that open or stat the name themselves, one `fstatat` less per path.
    package mutating func resolve(_ path: SafePath, under root: DirectoryHandle, lookingUp: Bool = true) throws(FileError) -> ResolvedPath {
        let components = path.components
        guard components.count > 1 else { return try path.resolve(under: root) }
        let parentComponents = components.dropLast()
        let directory: DirectoryHandle
        // By bytes: `String`'s == takes names that differ only by Unicode normalization as
        // equal, and those are two directories here.
        if let last, last.components.elementsEqual(parentComponents, by: { $0.utf8.elementsEqual($1.utf8) }) {
            directory = last.handle
        } else if let held = handles[PathKey(parentComponents.joined(separator: "/"))] {
            directory = held
            last = (parentComponents, held)
        } else {
            let resolved = try path.resolve(under: root)
            if handles.count >= Self.limit { handles.removeAll(keepingCapacity: true) }
            handles[PathKey(parentComponents.joined(separator: "/"))] = resolved.directory
            last = (parentComponents, resolved.directory)
            return resolved
        }
        return ResolvedPath(directory: directory, name: path.name, relative: path, existing: lookingUp ? directory.entryKind(path.name) : nil)
    }

    /// Lets every handle go (closed once nothing else holds it).
    package mutating func clear() {
        handles.removeAll(keepingCapacity: true)
        last = nil
    }
}
