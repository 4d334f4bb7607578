/// SyncEngine: the node and its parts. It emits events and returns values; it never prints.
public enum SyncEngine {}
