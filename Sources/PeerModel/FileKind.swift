/// What a path in a shared folder is: the one kind enum of the scanner, the index, the
/// planner and the wire. Anything else on disk (FIFOs, sockets, devices) is not synced.
/// The raw value is the index's text (`files.kind`); the wire has its own code (PeerWire).
package enum FileKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case file
    case directory
    case symlink

    package var description: String { rawValue }
}
