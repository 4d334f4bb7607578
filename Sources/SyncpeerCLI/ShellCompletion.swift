/// What a shell completes for an option's value or a positional argument, read from its
/// placeholder: a PEER or DEVICE is a paired peer's name (`syncpeer peers --names`, asked of
/// the running daemon as the user presses Tab), a DIR a directory, a PATH or FILE a file,
/// lowercase alternatives ("on|off") those words; anything else (a NAME, TEXT, HOST:PORT)
/// gets nothing rather than misleading file names.
enum ShellCompletion: Equatable {
    case nothing
    case files
    case directories
    /// Paired peers' names, and these words.
    case peers([String])
    case words([String])
    /// The command names (`help COMMAND`).
    case commands

    init(placeholder: String, values: [String] = []) {
        let tokens = placeholder.split(separator: "|").map(String.init)
        let words = tokens.filter { $0 == $0.lowercased() && $0.contains(where: \.isLetter) } + values
        if tokens.contains("PEER") || tokens.contains("DEVICE") {
            self = .peers(words)
        } else if tokens.contains("DIR") {
            self = .directories
        } else if tokens.contains("PATH") || tokens.contains("FILE") {
            self = .files
        } else if tokens.contains("COMMAND") {
            self = .commands
        } else {
            self = words.isEmpty ? .nothing : .words(words)
        }
    }

    init(_ option: OptionSpec) {
        switch option.kind {
        case .flag, .optionalValue: self = .nothing
        case let .value(name), let .repeating(name): self.init(placeholder: name, values: option.values)
        }
    }

    /// The completion of a command's `position`-th argument (0 first; a repeating last one
    /// covers the rest).
    static func argument(_ spec: CommandSpec, at position: Int) -> ShellCompletion {
        guard let last = spec.arguments.last else { return .nothing }
        if position < spec.arguments.count { return ShellCompletion(placeholder: spec.arguments[position].name) }
        return last.repeating ? ShellCompletion(placeholder: last.name) : .nothing
    }
}
