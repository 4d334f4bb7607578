internal import FoundationEssentials
package import PeerNet

extension JSONValue {
    /// Reads this JSON as a typed value (the CLI's view of a result or event); a shape that
    /// does not match is a data error naming the type.
    package func decode<T: Decodable>(as type: T.Type = T.self) throws(EngineError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: JSONEncoder().encode(self))
        } catch {
            throw .daemon(kind: .network, message: "the daemon's answer is not a \(T.self) (is it another version?): \(error)")
        }
    }
}
