/// The result of parsing one command line against a `CommandSpec`.
public struct ParsedArguments: Sendable, Equatable {
    /// Long names of flags that were given.
    public var flags: Set<String> = []
    /// Values of value and repeating options, in the order given.
    public var values: [String: [String]] = [:]
    /// Positional arguments, in order.
    public var positionals: [String] = []

    public init() {}

    public func flag(_ name: String) -> Bool { flags.contains(name) }
    public func value(_ name: String) -> String? { values[name]?.last }
    public func all(_ name: String) -> [String] { values[name] ?? [] }
}

/// Global settings taken from the command line and the environment.
public struct GlobalSettings: Sendable, Equatable {
    public var home: String?
    public var json: Bool = false
    public init(home: String? = nil, json: Bool = false) {
        self.home = home
        self.json = json
    }
}
