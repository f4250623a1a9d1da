//! In-process file and search tools, and the stored-result store.
