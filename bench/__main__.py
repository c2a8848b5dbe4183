"""`python -m bench`: run the benchmarks and print the report."""

import sys

from bench.run import main

sys.exit(main())
