/// What a file transfer reports while it runs: bytes done of the total, one-line notes, and
/// (`resume-v1`) the bytes the receiver held already from a cut transfer, not sent again.
package struct WormholeTransferReport: Sendable {
    package var progress: @Sendable (_ done: Int64, _ total: Int64) -> Void
    package var note: @Sendable (String) -> Void
    package var resumed: @Sendable (_ held: Int64) -> Void

    package init(progress: @escaping @Sendable (Int64, Int64) -> Void = { _, _ in }, note: @escaping @Sendable (String) -> Void = { _ in },
                resumed: @escaping @Sendable (Int64) -> Void = { _ in }) {
        self.progress = progress
        self.note = note
        self.resumed = resumed
    }
}
