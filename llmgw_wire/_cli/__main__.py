"""`python -m llmgw_wire._cli`: the `llmgw-wire` command."""

import sys

from llmgw_wire._cli import main

if __name__ == "__main__":
    sys.exit(main())
