"""`python -m rnnbench`: the `rnnbench` command, for environments whose scripts folder is not on
PATH."""
import sys

from rnnbench.cli import main

sys.exit(main())
