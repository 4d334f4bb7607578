/// How a scan's findings reach the index: in batches, each recorded in one transaction.
extension SharedFolder {
    /// The most items a scan batch grows to (its first holds `FolderScanner`'s 1,000, each
    /// next one twice the last): peers hear of a long scan's first files soon, and the rest
    /// is committed in few transactions, each rewriting the index pages it touched (D,
    /// 50,000 new files: 50 commits of 1,000 before, 15 now). A batch and what recording it
    /// builds are held at once: with 8,000, alice's peak in D was ~10 MiB higher.
    static let scanBatchCeiling = 4_000
}
