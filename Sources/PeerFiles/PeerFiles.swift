/// PeerFiles: everything that touches the user's folders — scanning, chunking, watching and
/// atomic writes. It grows with the resources and folder-sync issues.
///
/// Building blocks of resumable, verified transfers:
/// - `Chunker`, `ChunkParameters`, `FileChunker`: FastCDC content-defined chunking with a
///   BLAKE3 hash per chunk, streaming over files;
/// - `Manifest`, `ChunkRef`, `ChunkHash`: the chunk list and root hash of a file and its
///   binary encoding (what travels in a transfer offer);
/// - `SafePath`, `DirectoryHandle`, `ResolvedPath`: hostile names from peers refused, paths
///   resolved under a root without ever following a symbolic link, unique names;
/// - `PartialFile`: the receiving side (chunks written at their offsets, atomic no-replace
///   commit with mode and mtime, re-verification for resume);
/// - `ChunkReader`: the sending side (chunks read into a reused buffer);
/// - `OpenFile`: a file open for reading that any thread may read through (`pread`), closed
///   with its last reference: what a chunk streamed from another queue holds;
/// - `FileError`: the one I/O error type.
// (No namespace type: a type named like the module would hide the module's own name,
// making `PeerFiles.ScannedEntry` unreachable from modules that also define one.)
