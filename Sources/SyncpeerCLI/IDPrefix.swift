/// Finds what an ID the user typed names: the whole ID or any unique prefix of it, in any
/// case, among candidates (transfers, invitations, folders). Pure, for the table tests.
enum IDPrefix {
    struct Candidate: Equatable {
        let id: String
        /// How it is described in the list of candidates ("offer report.pdf from bob").
        let label: String
    }

    enum Match: Equatable {
        case one(Candidate)
        case none
        case ambiguous([Candidate])
    }

    /// An exact match wins over prefixes ("abc" when "abc" and "abcd" exist).
    static func match(_ typed: String, in candidates: [Candidate]) -> Match {
        let key = typed.lowercased()
        guard !key.isEmpty else { return .none }
        if let exact = candidates.first(where: { $0.id.lowercased() == key }) { return .one(exact) }
        var seen = Set<String>()
        let found = candidates.filter { $0.id.lowercased().hasPrefix(key) && seen.insert($0.id).inserted }
        switch found.count {
        case 0: return .none
        case 1: return .one(found[0])
        default: return .ambiguous(found)
        }
    }

    /// The error for an ambiguous prefix, listing what it could mean.
    static func ambiguity(_ typed: String, _ found: [Candidate]) -> String {
        "'\(typed)' could be any of: " + found.map { "\(display($0.id)) (\($0.label))" }.joined(separator: ", ") + "; give more of the ID"
    }

    /// A transfer ID shown by its first 12 characters, anything else whole.
    static func display(_ id: String) -> String { id.count > 16 ? String(id.prefix(12)) + "…" : id }
}
