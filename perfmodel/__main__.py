"""`python -m perfmodel ...` runs the command line (the same as the `perfmodel` script)."""

from perfmodel.cli import main

raise SystemExit(main())
