"""The `llmgw-wire` command."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return its exit status."""
    del argv
    print("llmgw-wire")
    return 0


if __name__ == "__main__":
    sys.exit(main())
