/// How many more index entries each peer may store in a folder before its quota has to be
/// counted again ("folder|device" → entries). A count of a peer's stored rows reads them
/// all, and a folder past the quota's allowance was counted for every page received: at a
/// million files, two thousand pages each counting a million rows. After a count, the room
/// it found is spent page by page, each page taken as if all its entries were new (an
/// upper bound: a page adds at most its own count of rows), and only a page that no longer
/// fits is counted. The room is capped, so a quota that shrank meanwhile (our own entries
/// removed) is read again at the latest after `cap` entries.
struct QuotaHeadroom {
    private var left: [String: Int] = [:]

    /// Takes `count` entries from the room of `key`, if it has that many.
    mutating func take(_ count: Int, key: String) -> Bool {
        guard let room = left[key], room >= count else { return false }
        left[key] = room - count
        return true
    }

    /// A count found that `stored` rows (the page's included) fit `quota`: the room left,
    /// at most `cap`.
    mutating func counted(key: String, stored: Int, quota: Int, cap: Int) {
        left[key] = max(0, min(quota - stored, cap))
    }

    /// Forgets the rooms of `device` (its session ended: a next one counts again).
    mutating func forget(device: String) {
        let suffix = "|" + device
        left = left.filter { !$0.key.hasSuffix(suffix) }
    }
}
