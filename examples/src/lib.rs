//! Shared code for the example binaries.
