//! Code generation for pajamax services.
