"""``python -m reconciler`` runs the CLI."""

from reconciler.cli.main import main

raise SystemExit(main())
