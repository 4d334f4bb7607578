/// What a file transfer reports while it runs: bytes done of the total, and one-line notes.
public struct WormholeTransferReport: Sendable {
    public var progress: @Sendable (_ done: Int64, _ total: Int64) -> Void
    public var note: @Sendable (String) -> Void

    public init(progress: @escaping @Sendable (Int64, Int64) -> Void = { _, _ in }, note: @escaping @Sendable (String) -> Void = { _ in }) {
        self.progress = progress
        self.note = note
    }
}
