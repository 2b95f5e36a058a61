//! criterion benchmarks for pajamax live in `benches/`.
