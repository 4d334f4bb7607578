internal import PeerCrypto

/// A wormhole code: `NAMEPLATE-WORD-WORD`, the nameplate a decimal number the mailbox
/// server allocated, the words from the PGP word list (odd, even, odd, …).
package struct WormholeCode: Sendable, Equatable, CustomStringConvertible {
    package static let maxLength = 256
    package let nameplate: String
    package let words: [String]

    package var description: String { ([nameplate] + words).joined(separator: "-") }

    /// A new code on `nameplate` with `count` random words.
    package static func random(nameplate: String, count: Int = 2) -> WormholeCode {
        let bytes = secureRandomBytes(count)
        let words = bytes.enumerated().map { $0.offset % 2 == 0 ? PGPWordList.odd[Int($0.element)] : PGPWordList.even[Int($0.element)] }
        return WormholeCode(nameplate: nameplate, words: words)
    }

    private init(nameplate: String, words: [String]) {
        self.nameplate = nameplate
        self.words = words
    }

    /// Whether a command-line word is a code rather than a file name: a number, then words
    /// of lowercase letters and digits, joined by '-' (`7-guitarist-revenge`; not `7-notes.txt`).
    package static func looksLikeCode(_ word: String) -> Bool {
        let parts = word.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 2, word.utf8.count <= maxLength, let first = parts.first, !first.isEmpty else { return false }
        return first.allSatisfy { $0.isASCII && $0.isNumber }
            && parts.dropFirst().allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber) } }
    }

    /// Parses what a user typed. The words are not checked against the list (other clients
    /// allow any password after the nameplate); spaces are not allowed.
    package init(parsing text: String) throws(WormholeError) {
        guard text.utf8.count <= Self.maxLength else { throw .invalidCode("longer than \(Self.maxLength) bytes") }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, let first = parts.first, !first.isEmpty, first.allSatisfy(\.isASCII), first.allSatisfy(\.isNumber) else {
            throw .invalidCode("'\(text)': expected a number, then words, joined by '-' (like 7-guitarist-revenge)")
        }
        guard parts.dropFirst().allSatisfy({ !$0.isEmpty && !$0.contains(where: { $0.isWhitespace || $0.isNewline }) }) else {
            throw .invalidCode("'\(text)': empty word or spaces")
        }
        nameplate = first
        words = Array(parts.dropFirst())
    }
}
