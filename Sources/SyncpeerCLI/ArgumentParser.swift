/// Parses a command's arguments against its spec. Accepts `--name value`, `--name=value`,
/// `-h`, global options anywhere, and `--` to end options. Unknown options and surplus
/// arguments are usage errors that suggest the closest known option.
package enum ArgumentParser {
    package static func parse(_ arguments: [String], spec: CommandSpec,
                             globals: inout GlobalSettings, help: inout Bool) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        let options = spec.options + GlobalOptions.specs
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            if optionsEnded || token == "-" || !token.hasPrefix("-") {
                parsed.positionals.append(token)
                continue
            }
            if token == "--" {
                optionsEnded = true
                continue
            }
            let option: OptionSpec
            var inlineValue: String?
            if token.hasPrefix("--") {
                let body = token.dropFirst(2)
                let name: Substring
                if let eq = body.firstIndex(of: "=") {
                    name = body[..<eq]
                    inlineValue = String(body[body.index(after: eq)...])
                } else {
                    name = body
                }
                guard let found = options.first(where: { $0.long == name }) else {
                    throw unknownOption("--" + name, spec: spec, candidates: options.map { "--" + $0.long })
                }
                option = found
            } else {
                guard token.count == 2, let found = options.first(where: { $0.short == token.last }) else {
                    throw unknownOption(token, spec: spec, candidates: options.map { "--" + $0.long })
                }
                option = found
            }

            switch option.kind {
            case .flag:
                if inlineValue != nil { throw .usage("option --\(option.long) takes no value") }
                parsed.flags.insert(option.long)
            case .optionalValue:
                // A flag that may carry a value: the flag is set either way.
                guard parsed.flags.insert(option.long).inserted else { throw .usage("option --\(option.long) is given more than once") }
                if let inlineValue {
                    parsed.values[option.long] = [inlineValue]
                } else if index < arguments.count, option.nextIsValue(arguments[index]) {
                    parsed.values[option.long] = [arguments[index]]
                    index += 1
                }
            case let .value(valueName), let .repeating(valueName):
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index < arguments.count else {
                        throw .usage("option --\(option.long) needs a value (\(valueName))")
                    }
                    value = arguments[index]
                    index += 1
                }
                if case .value = option.kind, parsed.values[option.long] != nil, !isGlobal(option) {
                    throw .usage("option --\(option.long) is given more than once")
                }
                parsed.values[option.long, default: []].append(value)
            }
        }

        // Globals are lifted out of the command's own result.
        if let home = parsed.values.removeValue(forKey: "home")?.last { globals.home = home }
        if parsed.flags.remove("json") != nil { globals.json = true }
        if parsed.flags.remove("help") != nil { help = true }
        if help { return parsed }

        try checkPositionals(parsed.positionals, spec: spec)
        return parsed
    }

    static func isGlobal(_ option: OptionSpec) -> Bool {
        GlobalOptions.specs.contains { $0.long == option.long }
    }

    static func checkPositionals(_ positionals: [String], spec: CommandSpec) throws(CLIError) {
        let required = spec.arguments.filter { !$0.optional }
        if positionals.count < required.count {
            let missing = required[positionals.count]
            throw .usage("'syncpeer \(spec.name)' needs \(missing.name): \(missing.help)")
        }
        let unbounded = spec.arguments.last?.repeating == true
        if !unbounded && positionals.count > spec.arguments.count {
            let extra = positionals[spec.arguments.count]
            throw .usage("unexpected argument '\(extra)' for 'syncpeer \(spec.name)'; see 'syncpeer help \(spec.name)'")
        }
    }

    static func unknownOption(_ given: String, spec: CommandSpec, candidates: [String]) -> CLIError {
        var message = "unknown option '\(given)' for 'syncpeer \(spec.name)'"
        if let suggestion = closest(to: given, in: candidates) {
            message += "; did you mean '\(suggestion)'?"
        } else {
            message += "; see 'syncpeer help \(spec.name)'"
        }
        return .usage(message)
    }

    /// The candidate with the smallest edit distance, if it is close enough to be a typo.
    static func closest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(word, $0)) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        let limit = max(2, word.count / 3)
        if best.1 <= limit { return best.0 }
        return candidates.first { $0.hasPrefix(word) && word.count >= 3 }
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
