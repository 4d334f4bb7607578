internal import FoundationEssentials

/// JSON as `[String: Any]`, the shape Foundation's `JSONSerialization` gave the wormhole and
/// global-discovery code (issue 42.6: it is not in FoundationEssentials). Numbers come out as
/// `Int` when whole, else `Double`; `null` as `NSNull`-free `Optional<Any>.none`.
extension JSONValue {
    /// The object that `bytes` hold; nil when they are not a JSON object.
    package static func object(parsing bytes: some Sequence<UInt8>) -> [String: Any]? {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)), case let .object(fields) = value else { return nil }
        return fields.mapValues(\.anyValue)
    }

    /// The JSON text of `object`; nil when a value is not a string, number, bool, array or object.
    package static func bytes(of object: [String: Any]) -> [UInt8]? {
        guard let value = JSONValue(any: object), let data = try? JSONEncoder().encode(value) else { return nil }
        return Array(data)
    }

    /// `value` as JSON: strings, bools, integers, doubles, arrays and dictionaries of them.
    package init?(any value: Any) {
        switch value {
        case let text as String: self = .string(text)
        case let flag as Bool: self = .bool(flag)
        case let number as Int: self = .number(Double(number))
        case let number as Int64: self = .number(Double(number))
        case let number as UInt64: self = .number(Double(number))
        case let number as Double: self = .number(number)
        case let values as [Any]:
            var array: [JSONValue] = []
            for element in values {
                guard let json = JSONValue(any: element) else { return nil }
                array.append(json)
            }
            self = .array(array)
        case let fields as [String: Any]:
            var object: [String: JSONValue] = [:]
            for (key, element) in fields {
                guard let json = JSONValue(any: element) else { return nil }
                object[key] = json
            }
            self = .object(object)
        case let json as JSONValue: self = json
        default: return nil
        }
    }

    /// This value as `Any`: `String`, `Bool`, `Int` (a whole number) or `Double`, `[Any]`,
    /// `[String: Any]`; `null` as an empty optional.
    package var anyValue: Any {
        switch self {
        case .null: return Optional<Any>.none as Any
        case let .bool(flag): return flag
        case let .number(number): return Int(exactly: number) ?? number
        case let .string(text): return text
        case let .array(values): return values.map(\.anyValue)
        case let .object(fields): return fields.mapValues(\.anyValue)
        }
    }
}
