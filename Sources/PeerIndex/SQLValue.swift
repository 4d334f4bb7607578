/// One SQLite value: what a statement binds and what a column holds.
///
/// SQLite has exactly these five storage classes; STRICT tables keep each column to one.
/// Literals work where a value is expected: `[42, "bob", 1.5, nil]`.
package enum SQLValue: Sendable, Hashable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null

    /// `.null` for nil, `.integer` otherwise.
    package init(_ value: Int64?) { self = value.map { .integer($0) } ?? .null }
    /// `.null` for nil, `.integer` otherwise.
    package init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    /// `.null` for nil, `.integer(0 or 1)` otherwise.
    package init(_ value: Bool?) { self = value.map { .integer($0 ? 1 : 0) } ?? .null }
    /// `.null` for nil, `.real` otherwise.
    package init(_ value: Double?) { self = value.map { .real($0) } ?? .null }
    /// `.null` for nil, `.text` otherwise.
    package init(_ value: String?) { self = value.map { .text($0) } ?? .null }
    /// `.null` for nil, `.blob` otherwise (an empty array stays an empty blob, not NULL).
    package init(_ value: [UInt8]?) { self = value.map { .blob($0) } ?? .null }

    package var isNull: Bool { self == .null }
    package var int64Value: Int64? { if case .integer(let v) = self { v } else { nil } }
    package var doubleValue: Double? { if case .real(let v) = self { v } else { nil } }
    package var stringValue: String? { if case .text(let v) = self { v } else { nil } }
    package var blobValue: [UInt8]? { if case .blob(let v) = self { v } else { nil } }
}

extension SQLValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByNilLiteral
{
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(floatLiteral value: Double) { self = .real(value) }
    package init(stringLiteral value: String) { self = .text(value) }
    package init(nilLiteral: ()) { self = .null }
}
