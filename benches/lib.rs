//! Criterion micro-benchmarks of skywave's codecs and compressors; the benchmarks themselves are
//! the `[[bench]]` targets beside this file (`cargo bench -p skywave-microbench`).
