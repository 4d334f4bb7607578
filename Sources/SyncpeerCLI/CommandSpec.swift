/// A hand-written argument parser in the shape of swift-argument-parser (which we cannot
/// depend on): each command declares its options and arguments in a `CommandSpec`; the
/// parser turns argv into `ParsedArguments`; the command's `init(parsing:)` validates and
/// `run` does the work. Help text is generated from the specs.

/// One `--option` of a command.
package struct OptionSpec: Sendable {
    package enum Kind: Sendable, Equatable {
        /// `--flag`, no value.
        case flag
        /// `--name VALUE` or `--name=VALUE`, at most once.
        case value(String)
        /// `--peer VALUE`, any number of times.
        case repeating(String)
        /// `--code` alone, or with a value: `--code=VALUE`, or `--code VALUE` when the next
        /// word is one `nextIsValue` accepts (otherwise that word is left to what follows).
        case optionalValue(String)

        /// Whether the option must be followed by a value (what shells complete after it).
        package var needsValue: Bool {
            switch self {
            case .value, .repeating: true
            case .flag, .optionalValue: false
            }
        }
    }

    package let long: String
    package let short: Character?
    package let kind: Kind
    package let help: String
    /// Words a shell completes for the value besides what its placeholder says
    /// (`ShellCompletion`): `--keep`'s `local`, `remote`.
    package let values: [String]
    /// `.optionalValue`: whether the word after the option is its value.
    package let nextIsValue: @Sendable (String) -> Bool

    package init(_ long: String, short: Character? = nil, _ kind: Kind = .flag, help: String, values: [String] = [],
                nextIsValue: @escaping @Sendable (String) -> Bool = { _ in false }) {
        self.long = long
        self.short = short
        self.kind = kind
        self.help = help
        self.values = values
        self.nextIsValue = nextIsValue
    }

    var usageFragment: String {
        switch kind {
        case .flag: return "--\(long)"
        case let .value(name): return "--\(long) \(name)"
        case let .repeating(name): return "--\(long) \(name) ..."
        case let .optionalValue(name): return "--\(long) [\(name)]"
        }
    }
}

/// One positional argument.
package struct ArgumentSpec: Sendable {
    package let name: String
    package let help: String
    package let optional: Bool
    package let repeating: Bool

    package init(_ name: String, help: String, optional: Bool = false, repeating: Bool = false) {
        self.name = name
        self.help = help
        self.optional = optional
        self.repeating = repeating
    }

    var usageFragment: String {
        let base = repeating ? "\(name) ..." : name
        return optional ? "[\(base)]" : base
    }
}

/// Everything the parser and the help generator know about a command.
package struct CommandSpec: Sendable {
    package let name: String
    /// One line: what the command does.
    package let abstract: String
    /// More paragraphs for `help COMMAND`.
    package let discussion: String
    package let options: [OptionSpec]
    package let arguments: [ArgumentSpec]
    /// Complete command lines shown under "Examples".
    package let examples: [String]

    package init(name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [],
                arguments: [ArgumentSpec] = [], examples: [String] = []) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.arguments = arguments
        self.examples = examples
    }
}

/// The options every command accepts, anywhere on the line.
enum GlobalOptions {
    static let specs: [OptionSpec] = [
        OptionSpec("home", .value("DIR"), help: "the node's home directory (default: $SYNCPEER_HOME, else $XDG_DATA_HOME/syncpeer, else ~/.local/share/syncpeer)"),
        OptionSpec("json", help: "print machine-readable JSON (one object per line) instead of text"),
        OptionSpec("help", short: "h", help: "show help for the command"),
    ]
}
