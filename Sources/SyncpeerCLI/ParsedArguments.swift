/// The result of parsing one command line against a `CommandSpec`.
package struct ParsedArguments: Sendable, Equatable {
    /// Long names of flags that were given.
    package var flags: Set<String> = []
    /// Values of value and repeating options, in the order given.
    package var values: [String: [String]] = [:]
    /// Positional arguments, in order.
    package var positionals: [String] = []

    package init() {}

    package func flag(_ name: String) -> Bool { flags.contains(name) }
    package func value(_ name: String) -> String? { values[name]?.last }
    package func all(_ name: String) -> [String] { values[name] ?? [] }
}

/// Global settings taken from the command line and the environment.
package struct GlobalSettings: Sendable, Equatable {
    package var home: String?
    package var json: Bool = false
    package init(home: String? = nil, json: Bool = false) {
        self.home = home
        self.json = json
    }
}
