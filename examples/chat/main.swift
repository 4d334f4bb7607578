// syncpeer-chat: Multipeer Connectivity's classic first sample, on syncpeer's public API.
//
//   terminal 1: syncpeer-chat --home /tmp/bob   --name bob   --listen 127.0.0.1:7001
//   terminal 2: syncpeer-chat --home /tmp/alice --name alice --connect 127.0.0.1:7001
//
// Lines typed in one terminal appear in the other. The listening side accepts every
// invitation (after showing its code); Ctrl-D ends the chat.
import Foundation
import Syncpeer

/// Writes a line to standard output at once (a pipe, as the tests read it, sees each line
/// as it is said). Not `print` + `fflush(nil)`: glibc's flush of every stream waits for the
/// lock of standard input, which a blocked `readLine()` holds.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let key = arguments.popFirst(), key.hasPrefix("--"), let value = arguments.popFirst() { options[String(key.dropFirst(2))] = value }
guard let home = options["home"], let name = options["name"] else {
    say("usage: syncpeer-chat --home DIR --name NAME [--listen HOST:PORT] [--connect HOST:PORT]")
    exit(2)
}

/// Standard input's lines, read on a thread of their own: a blocking `readLine()` must hold
/// neither the main actor nor one of the few threads that run tasks.
func standardInputLines() -> AsyncStream<String> {
    let (lines, continuation) = AsyncStream<String>.makeStream()
    Thread.detachNewThread {
        while let line = readLine() { continuation.yield(line) }
        continuation.finish()
    }
    return lines
}

/// The chat. Everything lives in locals here: a top-level variable of main.swift belongs to
/// the main actor, and a task that reads one waits for the main actor to be free.
func chat(home: String, name: String, listen: String, connect: String?) async throws {
    var configuration = Session.Configuration(displayName: name)
    configuration.listen = listen
    let session = try Session(home: home, configuration: configuration)
    say("listening on \(session.address) as \(session.myPeerID)")

    let events = session.events
    Task {
        for await event in events {
            switch event {
            case let .stateChanged(peer, state):
                say("* \(peer.displayName) is \(state.rawValue)")
            case let .received(data, from):
                say("\(from.displayName): \(String(decoding: data, as: UTF8.self))")
            default:
                break
            }
        }
    }

    if let address = connect {
        let peer = try await session.invite(address, context: "chat") { code in say("* code \(code): check that \(address) shows the same") }
        say("* connected to \(peer.displayName)")
    } else {
        let invitations = Advertiser(session: session).invitations
        Task {
            for await invitation in invitations {
                say("* invitation from \(invitation.peer.displayName) (\(invitation.context ?? "")), code \(invitation.code): accepted")
                try? invitation.accept()
            }
        }
    }

    for await line in standardInputLines() {
        let peers = session.connectedPeers
        if peers.isEmpty { say("* nobody is connected yet"); continue }
        do { try session.send(Data(line.utf8), to: peers) } catch { say("* \(error)") }
    }
    session.close()
}

try await chat(home: home, name: name, listen: options["listen"] ?? "127.0.0.1:0", connect: options["connect"])
