"""The interop tests: the stream against grpc-go peers run as processes (see peers.py)."""
