internal import FoundationEssentials
internal import PeerFiles

/// The daemon's configuration file: its options without the command line, so the systemd
/// user unit never needs editing. The path is `--config FILE`, else
/// `$XDG_CONFIG_HOME/syncpeer/config`, else `~/.config/syncpeer/config` (a missing default
/// file is no file). One option a line, `name = value`, named as `syncpeer daemon`'s long
/// options without the dashes; a flag takes `true` or `false`; an option that may repeat
/// (`peer`, `info`, `interface`) may have several lines; a line starting with `#` is a comment; a value
/// starting with `~/` is under $HOME. The command line wins: an option given there replaces
/// the file's (every line of it, for a repeating one).
///
///     # ~/.config/syncpeer/config
///     receive-dir = ~/Inbox
///     listen = [::]:41414
///     peer = 10.8.0.2:41414
///     invisible = true
struct DaemonConfigFile {
    /// The most a configuration file may hold: it is read whole.
    static let maxBytes = 64 << 10

    /// The file to read: `--config` (nil for `none`), else the default path if it exists.
    static func path(explicit: String?, environment: [String: String]) -> (path: String, required: Bool)? {
        if let explicit { return explicit == "none" ? nil : (explicit, true) }
        let base: String
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            base = config
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = home + "/.config"
        } else {
            return nil
        }
        return (base + "/syncpeer/config", false)
    }

    /// The file's options, as if given on the command line (nil: no file to read).
    static func load(explicit: String?, environment: [String: String], spec: CommandSpec) throws(CLIError) -> ParsedArguments? {
        guard let (path, required) = path(explicit: explicit, environment: environment) else { return nil }
        guard FileManager.default.fileExists(atPath: path) else {
            if required { throw .usage("--config \(path): no such file") }
            return nil
        }
        guard let file = PlainFile.reading(path), let data = try? file.read(upToCount: maxBytes + 1) else {
            throw .failure("cannot read the configuration file \(path)")
        }
        guard data.count <= maxBytes else { throw .usage("\(path): larger than \(maxBytes / 1024) KiB; is it the right file?") }
        guard let text = String(validating: data, as: UTF8.self) else { throw .usage("\(path): not UTF-8 text") }
        return try parse(text, path: path, spec: spec, home: environment["HOME"])
    }

    /// Parses the file's text against the daemon's options; an error names the line.
    static func parse(_ text: String, path: String, spec: CommandSpec, home: String?) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            let at = "\(path), line \(number + 1)"
            guard let equals = line.firstIndex(of: "=") else { throw .usage("\(at): expected 'name = value', got '\(line)'") }
            let name = line[..<equals].trimmingWhitespace()
            var value = line[line.index(after: equals)...].trimmingWhitespace()
            if name == "config" { throw .usage("\(at): a configuration file cannot name another ('config')") }
            guard let option = spec.options.first(where: { $0.long == name }) else {
                var message = "\(at): '\(name)' is not a daemon option"
                if let near = ArgumentParser.closest(to: name, in: spec.options.map(\.long)) { message += "; did you mean '\(near)'?" }
                throw .usage(message + " (see 'syncpeer help daemon')")
            }
            if value.hasPrefix("~/"), let home { value = home + value.dropFirst(1) }
            switch option.kind {
            case .flag:
                switch value {
                case "true": parsed.flags.insert(name)
                case "false": parsed.flags.remove(name)
                default: throw .usage("\(at): \(name) takes true or false, got '\(value)'")
                }
            case .value:
                parsed.values[name] = [value]
            case .repeating:
                parsed.values[name, default: []].append(value)
            case .optionalValue:
                parsed.flags.insert(name)
                parsed.values[name] = [value]
            }
        }
        return parsed
    }

    /// The file's options under the command line's: each option the command line gives
    /// replaces the file's.
    static func merge(file: ParsedArguments, commandLine: ParsedArguments) -> ParsedArguments {
        var merged = commandLine
        merged.flags.formUnion(file.flags)
        for (name, values) in file.values where commandLine.values[name] == nil { merged.values[name] = values }
        return merged
    }
}
