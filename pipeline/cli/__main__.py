"""`python -m pipeline.cli`: the same as the `unspecific` command (the app runs the demo so)."""

from pipeline.cli import main

raise SystemExit(main())
