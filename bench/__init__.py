"""The library's benchmarks (`make bench`, or `python -m bench --help`)."""
