"""Small, real jobs that ship with the package: the demo, the tests and the benchmarks run them."""
