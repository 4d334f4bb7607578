/// SyncpeerCLI: argument parsing, commands and rendering. No protocol or sync logic.
public enum SyncpeerCLI {}
